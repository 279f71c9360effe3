from sagakit.alembic_env import run_migrations

run_migrations(schema="pagos")
