-- One database, one schema and two roles per service: <svc>_owner runs the migrations,
-- <svc>_app is what the running service logs in as (database-as-api.md). Used by
-- docker-compose; the local stack runs the same statements (local_stack/postgres/database.py).
REVOKE ALL ON SCHEMA public FROM PUBLIC;
DO $$
DECLARE svc text;
BEGIN
  FOREACH svc IN ARRAY ARRAY['pedidos', 'inventario', 'pagos'] LOOP
    EXECUTE format('CREATE ROLE %I LOGIN PASSWORD %L', svc || '_owner', svc || '_owner');
    EXECUTE format('CREATE ROLE %I LOGIN PASSWORD %L', svc || '_app', svc || '_app');
    EXECUTE format('ALTER ROLE %I SET search_path = %I', svc || '_owner', svc);
    EXECUTE format('ALTER ROLE %I SET search_path = %I', svc || '_app', svc);
    EXECUTE format('CREATE SCHEMA %I AUTHORIZATION %I', svc, svc || '_owner');
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', svc, svc || '_app');
    EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA %I GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I', svc || '_owner', svc, svc || '_app');
    EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA %I GRANT USAGE, SELECT ON SEQUENCES TO %I', svc || '_owner', svc, svc || '_app');
  END LOOP;
END $$;
