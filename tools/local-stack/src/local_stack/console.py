"""What the stack tells its operator: one prefixed line at a time, flushed at once so that it
interleaves with the parts' output in ``make run``."""

from __future__ import annotations


def log(msg: str) -> None:
    print(f"[stack] {msg}", flush=True)
