"""docker-compose.yml run for real with podman, on a machine without a Docker engine.

``python -m compose_stack up`` builds what upstream registries would otherwise give (a Debian
bookworm root filesystem made with debootstrap, and on it PostgreSQL, Kafka, Prometheus and a
Python image: ``compose_stack.images``), then runs ``podman-compose up -d --wait`` on the
project's ``docker-compose.yml`` with those images named by its ``*_IMAGE`` variables.

Podman here is the project's own: its configuration, storage, volumes and networks live under
``.local/podman`` and a run directory of the checkout's own (``compose_stack.engine``), so it
never sees nor touches containers or images that someone else made on the machine.
"""
