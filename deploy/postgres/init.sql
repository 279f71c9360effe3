-- The services' roles with their passwords: an owner role per service runs its migrations, an
-- app role is what the running service logs in as (docs/operations.md#the-read-contract); and the readers of
-- the services' published read views, a login role per consumer (schemas.sql makes them
-- members of each service's <service>_reader group); and the schema registry's, which owns
-- its schema. Used by
-- docker-compose, whose postgres image runs it once, when it makes its data directory, before
-- schemas.sql (the schemas and grants, shared with the Kubernetes cluster, where the operator
-- makes the roles). The local stack runs the same statements (local_stack/postgres/database.py).
--
-- No password is written here: each comes from the container's environment (docker-compose.yml
-- passes them from the uncommitted .env, see .env.example), read with psql's \getenv (psql 15
-- or later). An unset one leaves its variable unset, the statement fails, and so does the init.
\set ON_ERROR_STOP on
\getenv pedidos_owner_password PEDIDOS_OWNER_PASSWORD
\getenv pedidos_app_password PEDIDOS_APP_PASSWORD
\getenv inventario_owner_password INVENTARIO_OWNER_PASSWORD
\getenv inventario_app_password INVENTARIO_APP_PASSWORD
\getenv pagos_owner_password PAGOS_OWNER_PASSWORD
\getenv pagos_app_password PAGOS_APP_PASSWORD
\getenv console_reader_password CONSOLE_READER_PASSWORD
\getenv sagactl_reader_password SAGACTL_READER_PASSWORD
\getenv grafana_reader_password GRAFANA_READER_PASSWORD
\getenv registry_owner_password REGISTRY_OWNER_PASSWORD

SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', role, password) FROM (VALUES
    ('pedidos_owner', :'pedidos_owner_password'),
    ('pedidos_app', :'pedidos_app_password'),
    ('inventario_owner', :'inventario_owner_password'),
    ('inventario_app', :'inventario_app_password'),
    ('pagos_owner', :'pagos_owner_password'),
    ('pagos_app', :'pagos_app_password'),
    ('console_reader', :'console_reader_password'),
    ('sagactl_reader', :'sagactl_reader_password'),
    ('grafana_reader', :'grafana_reader_password'),
    ('registry_owner', :'registry_owner_password')
) AS roles (role, password) \gexec
