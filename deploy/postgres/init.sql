-- One database, one schema and two roles per service: <svc>_owner runs the migrations,
-- <svc>_app is what the running service logs in as (database-as-api.md). Used by
-- docker-compose, whose postgres image runs it once, when it makes its data directory; the local
-- stack runs the same statements (local_stack/postgres/database.py).
--
-- No password is written here: each comes from the container's environment (docker-compose.yml
-- passes them from the uncommitted .env, see .env.example), read with psql's \getenv (psql 15
-- or later). An unset one leaves its variable unset, the statement fails, and so does the init.
\getenv pedidos_owner_password PEDIDOS_OWNER_PASSWORD
\getenv pedidos_app_password PEDIDOS_APP_PASSWORD
\getenv inventario_owner_password INVENTARIO_OWNER_PASSWORD
\getenv inventario_app_password INVENTARIO_APP_PASSWORD
\getenv pagos_owner_password PAGOS_OWNER_PASSWORD
\getenv pagos_app_password PAGOS_APP_PASSWORD

-- Only the roles granted it below may connect, as in the local stack.
SELECT format('REVOKE ALL ON DATABASE %I FROM PUBLIC', current_database()) \gexec
REVOKE ALL ON SCHEMA public FROM PUBLIC;

SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', role, password) FROM (VALUES
    ('pedidos_owner', :'pedidos_owner_password'),
    ('pedidos_app', :'pedidos_app_password'),
    ('inventario_owner', :'inventario_owner_password'),
    ('inventario_app', :'inventario_app_password'),
    ('pagos_owner', :'pagos_owner_password'),
    ('pagos_app', :'pagos_app_password')
) AS roles (role, password) \gexec

DO $$
DECLARE svc text;
BEGIN
  FOREACH svc IN ARRAY ARRAY['pedidos', 'inventario', 'pagos'] LOOP
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), svc || '_owner');
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO %I', current_database(), svc || '_app');
    EXECUTE format('ALTER ROLE %I SET search_path = %I', svc || '_owner', svc);
    EXECUTE format('ALTER ROLE %I SET search_path = %I', svc || '_app', svc);
    EXECUTE format('CREATE SCHEMA %I AUTHORIZATION %I', svc, svc || '_owner');
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', svc, svc || '_app');
    EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA %I GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I', svc || '_owner', svc, svc || '_app');
    EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA %I GRANT USAGE, SELECT ON SEQUENCES TO %I', svc || '_owner', svc, svc || '_app');
  END LOOP;
END $$;
