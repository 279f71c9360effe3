"""The project's own podman: a configuration (``CONTAINERS_CONF``) and a storage
(``CONTAINERS_STORAGE_CONF``) of its own, written under ``.local/podman``, so that the images,
containers, volumes and networks it makes are apart from any other podman user's on the machine.

The configuration holds what podman needs on a machine without systemd (the one this project is
tested on): the ``runc`` runtime, the ``cgroupfs`` cgroup manager, events in a file, and explicit
``nofile``/``nproc`` limits for every container (without them runc refuses the defaults podman
derives from the host's)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from compose_stack.settings import RUN, STATE

CONTAINERS_CONF = STATE / "containers.conf"
STORAGE_CONF = STATE / "storage.conf"
SHIM = STATE / "bin" / "podman"


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists() or path.read_text() != text:
        path.write_text(text)
    path.chmod(mode)


def configure() -> None:
    """Writes the configuration, the storage's and the podman shim (``compose_stack.shim``)."""
    _write(CONTAINERS_CONF, f"""\
# Written by compose_stack.engine: the project's own podman configuration (CONTAINERS_CONF).
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=1024:1024"]
log_driver = "k8s-file"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "{STATE / 'events.log'}"
tmp_dir = "{RUN / 'libpod'}"
volume_path = "{STATE / 'storage' / 'volumes'}"

[network]
network_backend = "netavark"
network_config_dir = "{STATE / 'networks'}"
""")
    _write(STORAGE_CONF, f"""\
# Written by compose_stack.engine: the project's own image and container storage.
[storage]
driver = "overlay"
graphroot = "{STATE / 'storage'}"
runroot = "{RUN / 'storage'}"
""")
    # podman-compose runs this in place of podman (--podman-path): see compose_stack.shim.
    _write(SHIM, f"#!{sys.executable}\nfrom compose_stack.shim import main\nmain()\n", 0o755)


def environment(extra: Mapping[str, str] | None = None,
                defaults: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every podman and podman-compose run: the project's configuration,
    storage and temporary files (buildah's cache mounts live under TMPDIR), ``defaults`` unless
    the caller's environment sets them, and ``extra``."""
    configure()
    tmp = STATE / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    return {**(defaults or {}), **os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF),
            "CONTAINERS_STORAGE_CONF": str(STORAGE_CONF), "TMPDIR": str(tmp),
            # Keeps a Dockerfile's HEALTHCHECK (the OCI image format has no such field).
            "BUILDAH_FORMAT": "docker", **(extra or {})}


# What running docker-compose.yml under podman runs: podman and its OCI runtime, its network
# stack (netavark, which sets up each container's network with iptables, and aardvark-dns for
# the containers' names), debootstrap and tar for the offline base image.
PROGRAMS = ("podman", "runc", "/usr/lib/podman/netavark", "/usr/lib/podman/aardvark-dns",
            "iptables", "debootstrap", "tar")


def podman_binary() -> str:
    found = shutil.which("podman")
    if found is None:
        raise SystemExit("[compose] podman is not installed (make bootstrap installs it, with "
                         "runc, netavark, aardvark-dns and debootstrap, from Debian's packages)")
    return found


def podman(*args: str, check: bool = True, capture: bool = False,
           env: Mapping[str, str] | None = None, input_data: bytes | None = None,
           ) -> subprocess.CompletedProcess[bytes]:
    """Runs the real podman (not the shim) with the project's configuration."""
    return subprocess.run([podman_binary(), *args], check=check, capture_output=capture,
                          env=environment(env), input=input_data)


def podman_version() -> tuple[int, ...]:
    out = subprocess.run([podman_binary(), "--version"], check=True, capture_output=True,
                         text=True).stdout
    return version_tuple(out.split()[-1])


def version_tuple(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("-")[0].split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def image_exists(name: str) -> bool:
    return podman("image", "exists", name, check=False).returncode == 0


def run_quiet(args: Sequence[str]) -> str:
    return podman(*args, capture=True).stdout.decode()
