"""The images docker-compose.yml names, made without any registry but Debian's and Maven
Central: the upstream images (postgres, apache/kafka, prom/prometheus, python) cannot be pulled
where this project is tested, so their stand-ins are built here.

1. The base: a Debian bookworm root filesystem made with ``debootstrap`` from Debian's mirror,
   with the building machine's own certificate authorities added (a machine behind an
   intercepting proxy reaches PyPI only through its authority), imported with ``podman import``.
2. On it, one image each from ``deploy/podman/*.Containerfile``: PostgreSQL at the pinned
   version from the server the local stack runs (Maven Central) and Debian's clients, Prometheus
   from Debian's package, Kafka from Debian's Java and Maven Central's jars, and the Python the
   services' own Dockerfile builds on.

The services' images are then built from ``deploy/docker/service.Dockerfile``, with
``PYTHON_IMAGE`` naming the Python image made here: each image once (``build_services``), however
many services run it, before podman-compose starts anything. ``image_variables()`` is what names them
for docker-compose.yml. The base is made once (``--force`` makes it again, with Debian's updates);
the others are built every time, which podman's layer cache makes quick when nothing changed.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from compose_stack.compose_file import ImageBuild, image_builds
from compose_stack.engine import environment, image_exists, podman_binary
from compose_stack.settings import BASE_IMAGE, DEBIAN_MIRROR, OFFLINE, PODMAN_FILES, ROOT, STATE
from local_stack.kafka import KAFKA_VERSION, maven_runtime
from local_stack.postgres.binaries import POSTGRES_MAJOR, POSTGRES_VERSION, server_home

# What each stand-in is called, and the variable of docker-compose.yml that names it.
IMAGES = {
    "python": (f"{OFFLINE}/python:3.11-bookworm", "PYTHON_IMAGE"),
    "postgres": (f"{OFFLINE}/postgres:{POSTGRES_VERSION}", "POSTGRES_IMAGE"),
    "kafka": (f"{OFFLINE}/kafka:{KAFKA_VERSION}", "KAFKA_IMAGE"),
    "prometheus": (f"{OFFLINE}/prometheus:bookworm", "PROMETHEUS_IMAGE"),
}
# The building machine's own authorities (Debian's place for them).
LOCAL_AUTHORITIES = Path("/usr/local/share/ca-certificates")


def log(message: str) -> None:
    print(f"[compose] {message}", flush=True)


def image_variables() -> dict[str, str]:
    """docker-compose.yml's image variables, naming the images made here."""
    return {variable: name for name, variable in IMAGES.values()}


def build_base(force: bool = False) -> None:
    if image_exists(BASE_IMAGE) and not force:
        return
    if shutil.which("debootstrap") is None:
        raise SystemExit("[compose] debootstrap is not installed (make bootstrap installs it)")
    STATE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=STATE, prefix="rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        log(f"debootstrap: Debian bookworm from {DEBIAN_MIRROR}")
        subprocess.run(["debootstrap", "--variant=minbase", "--include=ca-certificates",
                        "bookworm", str(rootfs), DEBIAN_MIRROR],
                       check=True, stdout=subprocess.DEVNULL)
        authorities = sorted(LOCAL_AUTHORITIES.glob("*.crt")) if LOCAL_AUTHORITIES.is_dir() else []
        if authorities:
            target = rootfs / "usr/local/share/ca-certificates"
            target.mkdir(parents=True, exist_ok=True)
            for crt in authorities:
                shutil.copy(crt, target / crt.name)
            subprocess.run(["chroot", str(rootfs), "update-ca-certificates"], check=True,
                           stdout=subprocess.DEVNULL)
        # No apt cache nor lists in the image: every Containerfile runs apt-get update first.
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for entry in (rootfs / cache).glob("*"):
                if entry.is_file():
                    entry.unlink()
        log(f"importing it as {BASE_IMAGE}")
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run([podman_binary(), "import", "--change", 'CMD ["/bin/bash"]',
                                   "-", BASE_IMAGE], stdin=tar.stdout, env=environment(),
                                  stdout=subprocess.DEVNULL)
        if tar.wait() != 0 or imported.returncode != 0:
            raise SystemExit("[compose] importing the root filesystem failed")


def _podman_build(image: str, args: list[str]) -> None:
    """One ``podman build``, its whole output kept in a log of its own: a failed build prints
    that log's end and names the image, rather than a step that failed somewhere."""
    log(f"building {image}")
    logs = STATE / "build-logs"
    logs.mkdir(parents=True, exist_ok=True)
    log_path = logs / (image.replace("/", "_").replace(":", "_") + ".log")
    with log_path.open("wb") as out:
        built = subprocess.run([podman_binary(), "build", *args, "-t", image],
                               stdout=out, stderr=subprocess.STDOUT, env=environment())
    if built.returncode != 0:
        tail = log_path.read_bytes()[-8000:].decode(errors="replace")
        print(tail, file=sys.stderr)
        raise SystemExit(f"[compose] building {image} failed (exit {built.returncode}); "
                         f"its whole log: {log_path}")


def _build(name: str, context: Path) -> None:
    args = ["--build-arg", f"POSTGRES_MAJOR={POSTGRES_MAJOR}"] if name == "postgres" else []
    _podman_build(IMAGES[name][0], ["--build-arg", f"BASE_IMAGE={BASE_IMAGE}", *args,
                                    "-f", str(PODMAN_FILES / f"{name}.Containerfile"),
                                    str(context)])


def build_service(build: ImageBuild) -> None:
    args = [arg for key, value in build.args for arg in ("--build-arg", f"{key}={value}")]
    _podman_build(build.image, [*args, "-f", str(build.dockerfile), str(build.context)])


def build_services(variables: dict[str, str], force: bool) -> None:
    """The images docker-compose.yml builds, one at a time and each once: all of them with
    ``force`` (``up --build``), else those missing."""
    for build in image_builds(variables):
        if force or not image_exists(build.image):
            build_service(build)


def _kafka_context() -> Path:
    """The Kafka image's build folder: its jars (Maven, once per pom), scripts and log4j2."""
    context = STATE / "build" / "kafka"
    maven_runtime(PODMAN_FILES / "kafka" / "pom.xml", context / "libs")
    shutil.rmtree(context / "bin", ignore_errors=True)
    shutil.copytree(PODMAN_FILES / "kafka" / "bin", context / "bin")
    shutil.copy(ROOT / "deploy/local/kafka/log4j2.properties", context / "log4j2.properties")
    return context


def _postgres_context() -> Path:
    """The PostgreSQL image's build folder: the pinned version's server (fetched and unpacked
    once, as the local stack's) and the entrypoint."""
    context = STATE / "build" / "postgres"
    server_home(context / "server")
    shutil.copy(PODMAN_FILES / "postgres-entrypoint.sh", context / "postgres-entrypoint.sh")
    return context


def build_all(force: bool = False) -> dict[str, str]:
    """Makes the base if missing (again with ``force``), then the others; returns
    image_variables()."""
    build_base(force)
    for name in IMAGES:
        contexts = {"kafka": _kafka_context, "postgres": _postgres_context}
        _build(name, contexts[name]() if name in contexts else PODMAN_FILES)
    return image_variables()
