"""Where a component's CPU goes: py-spy samples of one Python process, summed by package.

``make bench`` profiles the stack's hottest Python service while it is saturated, so that a
missed goal comes with the component that spends the time and what in it does. The
samples are grouped by the package of the innermost Python frame (the "leaf"): time inside a
C extension (asyncpg's protocol, uvloop) shows as the Python line that called it. py-spy
samples only threads that are running, not ones waiting in ``epoll``.

With native frames (``--native``, the default), two kinds of samples are told apart from the
Python line they happened under, because they are not that line's work:

- ``(socket write)``: a ``write``/``send`` system call. On a saturated machine these are
  mostly time spent *waiting for a core*: writing a statement to PostgreSQL's socket wakes its
  backend, the scheduler runs it, and the writer stays "running" in the kernel until it gets a
  core back. Without native frames they showed as asyncpg's ``_do_execute`` (29 % of pedidos'
  samples in one profile), while the process's system CPU was a tenth of its total.
- ``(garbage collector)``: CPython's cyclic collector, under whatever line allocated last.

Samples of a thread *waiting* (in ``poll``/``epoll_wait``, on a lock, a condition or a queue)
are left out of the shares and counted apart: with native frames py-spy stops the process to
sample it and so cannot tell a blocked thread from a running one. Counted, an idle thread-pool
worker (``concurrent.futures``' ``_worker`` in ``SimpleQueue.get``) and the metrics server's
thread (``selectors`` in ``poll``) took 44 % of pedidos' samples while using no CPU.
"""

from __future__ import annotations

import asyncio
import collections
import re
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

# "function (path:line)" — the form py-spy's raw output gives each frame.
_FRAME = re.compile(r"^(?P<function>.*?) \((?P<path>[^()]*?)(?::\d+)?\)$")
_STDLIB = re.compile(r"/python3\.\d+/(?P<module>[A-Za-z_][\w]*)")


def py_spy() -> str:
    """py-spy from the virtual environment that runs the benchmark (a dev dependency)."""
    return str(Path(sys.executable).with_name("py-spy"))


SOCKET_WRITE = "(socket write)"
GARBAGE_COLLECTOR = "(garbage collector)"
WAITING = "(waiting)"
# A blocked thread's innermost native frames: the system calls and libpython's lock waits.
_WAIT_CALLS = re.compile(
    r"^(__libc_|__GI___libc_|__)?(poll|ppoll|epoll_wait|epoll_pwait|select|pselect6?|"
    r"nanosleep|clock_nanosleep|sem_wait|sem_timedwait|sem_clockwait|pthread_cond_wait|"
    r"pthread_cond_timedwait|pthread_cond_clockwait|futex_wait|futex_abstimed_wait\w*|"
    r"PyThread_acquire_lock_timed)\b")
_WRITE_CALLS = re.compile(r"^(__libc_|__GI___libc_|__)?(write|writev|send|sendto|sendmsg)\b")


def is_python(frame: str) -> bool:
    """A Python frame (``file.py:line`` or a frozen module), not a native one (``loop.c:1``,
    ``libc.so.6``)."""
    m = _FRAME.match(frame)
    path = m.group("path") if m else ""
    return path.endswith(".py") or path.startswith("<frozen ")


def native_category(native: list[str]) -> str | None:
    """What the native frames under the innermost Python frame were doing, if it is one of
    the kinds told apart (module docstring)."""
    for frame in native:
        name = frame.split(" (", 1)[0]
        if _WAIT_CALLS.match(name):
            return WAITING
        if name.startswith("gc_collect"):
            return GARBAGE_COLLECTOR
        if _WRITE_CALLS.match(name) and "libc" in frame:
            return SOCKET_WRITE
    return None


def package_of(frame: str) -> str:
    """The package a py-spy frame belongs to: the top-level package or module of an installed
    distribution, of the standard library or of the workspace (under ``src/``)."""
    m = _FRAME.match(frame)
    path = m.group("path") if m else frame
    if path and not path.startswith(("/", "<")):
        # py-spy names a module found on sys.path by its path from there: "asyncpg/x.py".
        return path.split("/", 1)[0].removesuffix(".py")
    if "site-packages/" in path:
        return path.split("site-packages/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if "/src/" in path:
        return path.rsplit("/src/", 1)[1].split("/", 1)[0].removesuffix(".py")
    if path.startswith("<frozen "):
        return path.removeprefix("<frozen ").rstrip(">").split(".", 1)[0]
    std = _STDLIB.search(path)
    if std:
        return std.group("module")
    return "other"


@dataclass(frozen=True)
class Profile:
    samples: int
    """Samples of running threads: the shares below are of these."""
    leaf_by_package: list[tuple[str, float]]
    """Share of the samples whose innermost frame is in the package (adds up to 1)."""
    inclusive_by_package: list[tuple[str, float]]
    """Share of the samples with the package anywhere on the stack (overlaps)."""
    top_leaf_functions: list[tuple[str, float]]
    waiting_samples: int = 0
    """Samples of threads that were waiting (module docstring), left out of the shares."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise(raw: str, top: int = 12) -> Profile:
    """Sums py-spy's raw (collapsed-stack) output: one ``frame;frame;... count`` per line."""
    total = waiting = 0
    leaf: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    functions: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, count = line.rstrip().rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        last = max((i for i, f in enumerate(frames) if is_python(f)), default=len(frames) - 1)
        python = [f for f in frames[:last + 1] if is_python(f)] or frames
        innermost = frames[last]
        category = native_category(frames[last + 1:])
        if category == WAITING:
            waiting += n
            continue
        total += n
        leaf[category or package_of(innermost)] += n
        functions[f"{category} under {innermost}" if category else innermost] += n
        for package in {package_of(f) for f in python} | ({category} if category else set()):
            inclusive[package] += n

    def shares(counter: collections.Counter[str]) -> list[tuple[str, float]]:
        return [(k, round(v / total, 3)) for k, v in counter.most_common(top)] if total else []

    return Profile(total, shares(leaf), shares(inclusive), shares(functions), waiting)


async def record(pid: int, seconds: float, rate_hz: int = 100, native: bool = True
                 ) -> Profile:
    """Samples process ``pid`` for ``seconds``. With ``native`` py-spy stops the process for
    each sample to unwind its native stack (at 100 Hz, well under 1 % of its time); without,
    it reads the Python stacks while the process runs (``--nonblocking``)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "profile.txt"
        proc = await asyncio.create_subprocess_exec(
            py_spy(), "record", "--pid", str(pid), "--duration", str(int(seconds)),
            "--rate", str(rate_hz), "--format", "raw", "--output", str(out),
            "--native" if native else "--nonblocking",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        _, err = await proc.communicate()
        if proc.returncode != 0 or not out.exists():
            raise RuntimeError(f"py-spy failed ({proc.returncode}): {err.decode()[-500:]}")
        return summarise(out.read_text())
