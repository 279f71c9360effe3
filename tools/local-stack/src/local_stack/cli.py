"""The local stack without Docker: PostgreSQL, Kafka (KRaft), the fake gateway and the services.

    python -m local_stack up|down|status|logs|run|restart PART|kill PART|credentials

Every part runs as a process of its own, in its own process group, with its log under
``$SAGA_STATE_DIR/logs`` and its pid under ``$SAGA_STATE_DIR/run``. ``up`` is idempotent:
a part that already answers its health check is left alone. ``down`` stops every part and
then checks that none of their processes is left.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from local_stack import commands, credentials, restore
from local_stack.postgres import backup
from local_stack.postgres.data_dir import pg_data_dir
from local_stack.settings import RESTORE_TARGET_TIME, ROOT, prometheus_requested
from local_stack.system_programs import LOCAL_STACK, require


def main() -> None:
    # Marks every process the stack starts, so that ``down`` finds the ones without a pid file.
    os.environ["SAGA_STACK_ROOT"] = str(ROOT)
    parser = argparse.ArgumentParser(prog="python -m local_stack",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("command", choices=["up", "down", "status", "logs", "run", "restart",
                                            "start", "stop", "kill", "pg-data-dir",
                                            "credentials", "backup", "restore"])
    parser.add_argument("part", nargs="?")
    parser.add_argument("--no-wait", action="store_true",
                        help="start: do not wait for health (chaos restarts)")
    parser.add_argument("--prometheus", action="store_true",
                        help="also start Prometheus scraping the services")
    parser.add_argument("--target-time", default=RESTORE_TARGET_TIME,
                        help="restore: the time to recover to (ISO 8601, UTC unless it says "
                             "its offset); the latest there is by default")
    args = parser.parse_args()
    if args.command in ("up", "run", "start", "restart", "restore"):
        require(LOCAL_STACK)
    if args.command == "up":
        commands.up(args.prometheus or prometheus_requested())
    elif args.command == "down":
        commands.down()
    elif args.command == "status":
        commands.status()
    elif args.command == "pg-data-dir":
        print(pg_data_dir())
    elif args.command == "credentials":
        made = credentials.credentials()
        print(json.dumps(made, indent=2))
        if made["postgres"]["admin_dsn"] is None:
            print("[stack] the stack has not made its credentials yet: `make up` makes them",
                  file=sys.stderr)
    elif args.command == "logs":
        commands.follow_logs([args.part] if args.part else [*commands.part_order(), "prometheus"])
    elif args.command == "restart":
        commands.restart(args.part)
    elif args.command == "start":
        commands.start(args.part, wait=not args.no_wait)
    elif args.command == "stop":
        commands.stop(args.part)
    elif args.command == "kill":
        commands.kill(args.part)
    elif args.command == "backup":
        backup.backup()
    elif args.command == "restore":
        restore.restore(backup.parse_target(args.target_time))
    elif args.command == "run":
        commands.run(args.prometheus or prometheus_requested())


if __name__ == "__main__":
    main()
