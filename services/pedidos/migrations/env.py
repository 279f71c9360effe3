from sagakit.store.alembic_env import run_migrations

run_migrations(schema="pedidos")
