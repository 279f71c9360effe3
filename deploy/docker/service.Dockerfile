# syntax=docker/dockerfile:1
# One image per service (pedidos, inventario, pagos, fake-gateway, identity-provider, consola), sagactl
# in each:
#   docker build -f deploy/docker/service.Dockerfile --build-arg SERVICE=pedidos -t saga/pedidos:0.1.0 .
# The dependencies are a layer of their own, made from the lock file and the workspace's
# pyproject.toml files only: a change to the sources rebuilds the last layers, not that one.
# The base: Python's official image, by its registry, its tag (the Python release) and its digest
# (the very image, the manifest list of every platform: a tag is moved by each rebuild upstream).
# docker-compose.yml passes the same; --build-arg PYTHON_IMAGE=... builds on another.
ARG PYTHON_IMAGE=docker.io/library/python:3.11.7-slim-bookworm@sha256:8f64a67710f3d981cf3008d6f9f1dbe61accd7927f165f4e37ea3f8b883ccc3f

# The workspace's pyproject.toml files and the lock, nothing else: this stage runs again on
# any change, but its output changes only with them, so the next stage's cache holds.
FROM ${PYTHON_IMAGE} AS manifests
WORKDIR /src
COPY . .
RUN mkdir /manifests \
    && find . -name pyproject.toml -not -path './.venv/*' -exec cp --parents {} /manifests \; \
    && cp uv.lock /manifests/

FROM ${PYTHON_IMAGE} AS build
# uv at a pinned version, its wheel checked against the hashes in uv-requirements.txt, in a
# virtual environment of its own (a distribution's Python, such as Debian's, refuses packages
# installed beside its own: PEP 668).
COPY deploy/docker/uv-requirements.txt /tmp/uv-requirements.txt
RUN python -m venv /opt/uv \
    && /opt/uv/bin/pip install --no-cache-dir --require-hashes -r /tmp/uv-requirements.txt
ENV PATH=/opt/uv/bin:$PATH UV_PROJECT_ENVIRONMENT=/opt/venv UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never
WORKDIR /app
ARG SERVICE
COPY --from=manifests /manifests/ ./
# --locked: the build fails, rather than resolving anew, when uv.lock is not the workspace's.
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --locked --no-dev --no-install-workspace --package ${SERVICE} --package sagactl
COPY libs ./libs
COPY services ./services
COPY tools/sagactl ./tools/sagactl
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --locked --no-dev --no-editable --package ${SERVICE} --package sagactl

FROM ${PYTHON_IMAGE}
ARG SERVICE
# The port the service listens on (HTTP_PORT; the local stack's: pedidos 8001, inventario 8002,
# pagos 8003, fake-gateway 8010, identity-provider 8020, consola 8030), given by the build.
ARG PORT
ENV SERVICE=${SERVICE} HTTP_HOST=0.0.0.0 HTTP_PORT=${PORT} GATEWAY_HOST=0.0.0.0 GATEWAY_PORT=${PORT} \
    PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PATH=/opt/venv/bin:$PATH
# /data is the user's: a new named volume mounted there starts with this directory's owner (the
# fake gateway's ledger, the identity provider's key, Prometheus' scrape token in
# docker-compose.yml), where a directory made by the mount would be root's.
RUN groupadd --gid 10001 saga \
    && useradd --uid 10001 --gid saga --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin saga \
    && install -d -o 10001 -g 10001 -m 0755 /data
COPY --from=build /opt/venv /opt/venv
# The service's migrations (alembic.ini and migrations/), for its one-shot migration step.
COPY --from=build /app/services/${SERVICE} /app/services/${SERVICE}
WORKDIR /app
USER 10001:10001
EXPOSE ${PORT}
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen(f\"http://127.0.0.1:{os.environ['HTTP_PORT']}/health\", timeout=2)"]
# The service alone, under its app role (DATABASE_URL). Its migrations are a step of their own,
# the same image run once before it with `alembic -c services/$SERVICE/alembic.ini upgrade head`
# and the schema owner's DATABASE_URL (docker-compose.yml's <service>-migrations, the
# Kubernetes migration Jobs): the owner's password never reaches the running service.
CMD ["sh", "-c", "exec python -m $(echo $SERVICE | tr - _)"]
