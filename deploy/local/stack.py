"""The local stack without Docker: PostgreSQL, Kafka (KRaft), the fake gateway and the services.

    python deploy/local/stack.py up|down|status|logs|run|start|stop|restart|kill [PART]
    python deploy/local/stack.py credentials
    python deploy/local/stack.py backup|restore [--target-time ISO-TIME]

The code is the ``local_stack`` package (tools/local-stack), which ``uv sync`` installs in the
workspace's environment; this file is the command the Makefile, the docs and the tests run.
"""

from __future__ import annotations

try:
    from local_stack.cli import main
except ModuleNotFoundError as missing:
    if missing.name != "local_stack":
        raise
    # An environment made before the package existed: say how to fix it rather than a traceback.
    raise SystemExit("[stack] the local_stack package is not installed in this Python "
                     "environment: run `uv sync --frozen` (or `make bootstrap`), then retry") from None

if __name__ == "__main__":
    main()
