-- Per service a schema owned by its owner role (migrations) and the rights of its app role (the
-- running service) in it (docs/operations.md#the-read-contract); its read schema (<service>_read, where its
-- migrations publish versioned views), the group role they are granted to (<service>_reader,
-- no login), and the readers' login roles (console_reader, sagactl_reader, grafana_reader),
-- each a member of every <service>_reader and of nothing else; the schema registry's schema
-- (registry), owned by its role (registry_owner). Plain SQL, no psql command, so that it runs the
-- same in docker-compose's PostgreSQL (after init.sql, which makes the roles with their
-- passwords) and in the Kubernetes CloudNativePG cluster (postInitApplicationSQLRefs, a
-- ConfigMap made from this file by deploy/postgres/kustomization.yaml), where the roles get their
-- passwords and LOGIN afterwards, from the operator's managed roles: a role missing here is made
-- without either. The local stack runs the same statements (local_stack/postgres/database.py).
DO $$
DECLARE
  svc text;
  who text;
  reader text;
BEGIN
  -- Only the roles granted it below may connect, as in the local stack.
  EXECUTE format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database());
  EXECUTE 'REVOKE ALL ON SCHEMA public FROM PUBLIC';
  FOREACH svc IN ARRAY ARRAY['pedidos', 'inventario', 'pagos'] LOOP
    FOREACH who IN ARRAY ARRAY[svc || '_owner', svc || '_app'] LOOP
      IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = who) THEN
        EXECUTE format('CREATE ROLE %I NOLOGIN', who);
      END IF;
      EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), who);
      EXECUTE format('ALTER ROLE %I SET search_path = %I', who, svc);
    END LOOP;
    -- The group role the published read views (schema <svc>_read, made by the service's
    -- migrations) are granted to.
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = svc || '_reader') THEN
      EXECUTE format('CREATE ROLE %I NOLOGIN', svc || '_reader');
    END IF;
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I AUTHORIZATION %I', svc, svc || '_owner');
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I AUTHORIZATION %I', svc || '_read', svc || '_owner');
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', svc, svc || '_app');
    EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA %I GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I', svc || '_owner', svc, svc || '_app');
    EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA %I GRANT USAGE, SELECT ON SEQUENCES TO %I', svc || '_owner', svc, svc || '_app');
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = svc || '_reader') THEN
      EXECUTE format('CREATE ROLE %I NOLOGIN', svc || '_reader');
    END IF;
    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I AUTHORIZATION %I', svc || '_read', svc || '_owner');
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', svc || '_read', svc || '_reader');
    FOREACH reader IN ARRAY ARRAY['console_reader', 'sagactl_reader', 'grafana_reader'] LOOP
      IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = reader) THEN
        EXECUTE format('CREATE ROLE %I NOLOGIN', reader);
      END IF;
      EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), reader);
      EXECUTE format('GRANT %I TO %I', svc || '_reader', reader);
    END LOOP;
  END LOOP;
  -- The schema registry's schema, owned by the role it runs as: Apicurio makes and upgrades
  -- its tables itself as it starts.
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'registry_owner') THEN
    CREATE ROLE registry_owner NOLOGIN;
  END IF;
  EXECUTE format('GRANT CONNECT ON DATABASE %I TO registry_owner', current_database());
  ALTER ROLE registry_owner SET search_path = registry;
  CREATE SCHEMA IF NOT EXISTS registry AUTHORIZATION registry_owner;
END $$;
