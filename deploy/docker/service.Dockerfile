# One image per service: docker build -f deploy/docker/service.Dockerfile --build-arg SERVICE=pedidos .
FROM python:3.11-slim
ARG SERVICE
ENV SERVICE=${SERVICE} PYTHONUNBUFFERED=1 UV_PROJECT_ENVIRONMENT=/opt/venv PATH=/opt/venv/bin:$PATH
RUN pip install --no-cache-dir uv
WORKDIR /app
COPY pyproject.toml uv.lock ./
COPY libs ./libs
COPY services ./services
RUN uv sync --frozen --no-dev --package ${SERVICE}
EXPOSE 8000
# Migrations are a start step, under the schema owner's credentials (MIGRATION_DATABASE_URL).
CMD ["sh", "-c", "if [ -d services/$SERVICE/migrations ]; then DATABASE_URL=$MIGRATION_DATABASE_URL alembic -c services/$SERVICE/alembic.ini upgrade head; fi && exec python -m $(echo $SERVICE | tr - _)"]
