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
# The service alone, under its app role (DATABASE_URL). Its migrations are a step of their own,
# the same image run once before it with `alembic -c services/$SERVICE/alembic.ini upgrade head`
# and the schema owner's DATABASE_URL (docker-compose.yml's <service>-migrations): the owner's
# password never reaches the running service.
CMD ["sh", "-c", "exec python -m $(echo $SERVICE | tr - _)"]
