"""sagactl — sagas (and the stuck ones), a saga's timeline, payments that need a person, the
operator's actions on them, dead letters and their safe replay.

    sagactl sagas [--status S]... [--older-than SECONDS] [--stuck] [--limit N]
    sagactl timeline SAGA_ID
    sagactl payments [--needing-action] [--saga SAGA_ID] [--limit N]
    sagactl cancel SAGA_ID --reason WHY
    sagactl retry SAGA_ID [--reason WHY]
    sagactl resolve-payment PAYMENT_ID --reference REF [--note TEXT]
    sagactl dlq [--service S] [--state S] [--group-by reason|error_class] [--limit N] [--errors]
    sagactl replay DEAD_LETTER_ID --service S [--payload FILE] [--dry-run]
    sagactl replay-group --service S --event-type T --error-class C [--dry-run] [--limit N]
    sagactl archive DEAD_LETTER_ID --service S --reason R
    sagactl signing-key
    sagactl topics create|check
    sagactl schemas register [--schemas DIR] [--group G]
    sagactl schemas catalog [--group G] [FILE]
    sagactl schemas deprecate ARTIFACT [VERSION] [--group G]
    sagactl schemas retire ARTIFACT [VERSION] [--unused-days N] [--group G]

Every command takes ``--output json`` (one JSON document on stdout) beside the default text.
It reads through the services' published views as a reader role, and acts through their APIs
with an operator's token (``sagactl.connection`` says which and where). Replays re-read their
original from Kafka and are published as the ``operator`` principal, never ``admin``, signed
with the operator's key in SAGACTL_SIGNING_KEY_FILE (default: the local stack's, in the checkout
sagactl runs from): ``sagactl.operator_access``, ``sagactl.dead_letters``. ``signing-key``
prints its public key as the services' SAGA_OPERATOR_PUBLIC_KEYS names it; ``topics`` speaks
as the principal the KAFKA_* variables name. ``schemas`` speaks to the schema registry
(``sagactl.schema_registry`` says where and as whom): ``register`` puts every schema version of
the contracts there with their compatibility rules, or stops with the registry's verdict on the
one it refuses (``sagactl.schema_registration``); ``catalog`` renders docs/events.md from what
the registry holds; ``deprecate`` and ``retire`` end a version's life, retire only once no
service used it for SAGACTL_SCHEMA_RETIRE_UNUSED_DAYS (``sagactl.schema_lifecycle``).

Nothing it prints shows a payment token, in the clear or sealed: the fields the schemas declare
sensitive are masked (or left out) and token-shaped text is masked wherever it appears (an
error's text quotes what it refused). What ``replay`` sends is the broker's record of the
letter's original, token included, sealed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import asyncpg
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from saga_contracts import replay_signature, schema_artifacts
from saga_contracts.redaction import scrub
from sagactl import actions, connection, dead_letters, operator_access, reads
from sagactl import schema_lifecycle as lifecycle
from sagactl import schema_registration as schemas
from sagactl.schema_registry import RegistryError, registry
from sagakit import settings
from sagakit.operations.replay import Outcome
from sagakit.settings import KafkaClientSettings

# The checkout, when sagactl runs from one (the workspace installs it from its source,
# tools/sagactl/src): the local stack generates the operator's key in its state directory.
_CHECKOUT = Path(__file__).resolve().parents[4]


class CannotSign(Exception):
    pass


def _signing_key_file() -> Path:
    return operator_access.signing_key_file(_CHECKOUT)


def _signing_key() -> Ed25519PrivateKey:
    """Raises ``CannotSign`` when there is no key to sign with."""
    path = _signing_key_file()
    try:
        return replay_signature.load_private_key(path.read_bytes())
    except OSError as exc:
        raise CannotSign(f"no operator signing key at {path} ({exc.strerror}): set "
                         "SAGACTL_SIGNING_KEY_FILE, or start the local stack once") from None
    except replay_signature.InvalidKey as exc:
        raise CannotSign(f"{path}: {exc}") from None


def _say(text: str, *, error: bool = False) -> None:
    """Prints ``text`` with anything token-shaped masked."""
    print(scrub(text), file=sys.stderr if error else sys.stdout)


def _json(document: Any) -> None:
    """Prints ``document`` as one JSON document (dates, UUIDs and amounts as text), with
    anything token-shaped masked."""
    _say(json.dumps(document, default=str, indent=2))


def _show(args: argparse.Namespace, rows: list[dict[str, Any]], columns: list[str]) -> None:
    if args.output == "json":
        _json(rows)
    else:
        _say(_table(rows, columns))


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    if not rows:
        return "(none)"
    cells = [[str(r.get(c, "") if r.get(c) is not None else "") for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    return "\n".join(lines)


async def _topics(*, create: bool, as_json: bool = False) -> int:
    """The saga's topics as the topic settings say (``sagakit.kafka_topics``), on the cluster
    the KAFKA_* variables reach: ``create`` makes those missing; either way each is listed
    with its state. 1 when one is missing (check) or differs from the settings."""
    from saga_contracts.topics import ALL_TOPICS
    from sagakit.kafka_topics import TopicSettings, TopicState, admin_client, compare, provision_topics

    wanted = settings.load(TopicSettings)
    admin = admin_client(settings.load(KafkaClientSettings))
    await admin.start()
    try:
        if create:
            states = await provision_topics(admin, wanted, ALL_TOPICS)
        else:
            listed = set(await admin.list_topics())
            described = await admin.describe_topics([t for t in ALL_TOPICS if t in listed])
            missing, states = compare({t["topic"]: (len(t["partitions"]),
                                                    len(t["partitions"][0]["replicas"]))
                                       for t in described if t["partitions"]}, wanted, ALL_TOPICS)
            states += [TopicState(t, "missing") for t in missing]
    finally:
        await admin.close()
    shown = [{"topic": s.name, "state": s.state, "detail": s.detail} for s in states]
    if as_json:
        _json({"partitions": wanted.topic_partitions,
               "replication_factor": wanted.replication_factor,
               "min_insync_replicas": wanted.min_insync_replicas, "topics": shown})
    else:
        _say(f"partitions {wanted.topic_partitions}, replication factor "
             f"{wanted.replication_factor}, min.insync.replicas {wanted.min_insync_replicas}")
        _say(_table(shown, ["topic", "state", "detail"]))
    return 1 if any(s.state in ("missing", "differs") for s in states) else 0


def _print_signing_key(as_json: bool = False) -> int:
    try:
        key = _signing_key()
    except CannotSign as exc:
        print(exc, file=sys.stderr)
        return 2
    entry = replay_signature.public_entry(key)
    print(json.dumps({"key_id": entry.partition(":")[0], "public_key": entry}) if as_json
          else entry)
    return 0


def _acted(args: argparse.Namespace, answer: actions.Answer, done: str) -> int:
    """An action's answer: 0 when the service did it, 1 when it refused (its HTTP status and
    detail said). As JSON, the service's answer with its ``http_status``."""
    if args.output == "json":
        _json({"http_status": answer.status, **answer.body})
    elif answer.ok:
        _say(done)
    else:
        _say(f"refused ({answer.status}): {answer.body.get('detail')}", error=True)
    return 0 if answer.ok else 1


def _act(args: argparse.Namespace) -> int:
    if args.command == "cancel":
        answer = actions.cancel(args.saga_id, args.reason)
        return _acted(args, answer, f"saga {args.saga_id}: {answer.body.get('status')}")
    if args.command == "retry":
        answer = actions.retry(args.saga_id, args.reason)
        return _acted(args, answer, f"saga {args.saga_id}: step "
                                    f"{answer.body.get('step')} sent again as "
                                    f"{answer.body.get('message_id')}")
    answer = actions.resolve_payment(args.payment_id, args.reference, args.note)
    return _acted(args, answer, f"payment {args.payment_id} resolved by "
                                f"{answer.body.get('resolved_by')} under "
                                f"{answer.body.get('reference')}")


async def _read(args: argparse.Namespace) -> int:
    conn = await connection.connect(connection.reader_dsn())
    try:
        if args.command == "sagas":
            rows = await reads.sagas(conn, statuses=args.status or None,
                                     older_than_s=args.older_than, stuck_only=args.stuck,
                                     limit=args.limit)
            for r in rows:
                r["age"] = f"{r['age_s']:.0f}s"
                r["idle"] = f"{r['idle_s']:.0f}s"
                r["flag"] = "STUCK" if r["stuck"] else ""
            _show(args, rows, ["saga_id", "status", "current_step", "age", "idle",
                               "step_deadline_at", "flag"])
        elif args.command == "timeline":
            entries = await reads.timeline(conn, args.saga_id)
            if not entries:
                _say(f"no saga {args.saga_id}", error=True)
                return 1
            _show(args, entries, ["at", "where", "what", "detail"])
        else:
            rows = await reads.payments(conn, needing_action=args.needing_action,
                                        saga_id=args.saga, limit=args.limit)
            _show(args, rows, ["payment_id", "saga_id", "status", "amount", "currency",
                               "charge_id", "marked_at" if args.needing_action
                               else "resolution_reference"])
        return 0
    finally:
        await conn.close()


def _emit(args: argparse.Namespace, document: Any, text: str) -> None:
    """``document`` as JSON with ``--output json``, else ``text``; token-shaped text masked."""
    if getattr(args, "output", "text") == "json":
        _say(json.dumps(document, indent=2, default=str))
    else:
        _say(text)


def _outcome_text(o: Outcome, dry_run: bool) -> str:
    if o.outcome == "replayed":
        return (json.dumps(o.plan, indent=2) + f"\nreplayed as {o.message_id} for {o.service}")
    if o.outcome == "would_replay":
        return json.dumps(o.plan, indent=2) + "\ndry run: nothing sent"
    if o.outcome == "forged":
        return (f"{o.id}: refused, forged: {o.detail}"
                + (" (a dry run: not reported)" if dry_run else f" (reported to {o.service})"))
    return f"{o.id}: cannot replay: {o.detail}"


async def _dead_letter_command(conn: asyncpg.Connection, args: argparse.Namespace) -> int:
    if args.command == "dlq":
        rows = await dead_letters.letters(conn, service=args.service, state=args.state,
                                          limit=args.limit)
        if args.group_by:
            groups = dead_letters.grouped(rows, args.group_by)
            _emit(args, groups, _table(groups, ["service", "event_type", args.group_by,
                                                "count", "oldest", "newest"]))
            return 0
        for r in rows:
            r["tries"] = len(r["attempts"])
            r["last_error"] = (r["attempts"][-1]["error"][:80] if r["attempts"] else "")
        text = _table(rows, ["id", "service", "at", "event_type", "saga_id", "reason",
                             "error_class", "state", "tries", "last_error"])
        if args.errors:
            for r in rows:
                text += f"\n\n{r['id']} ({r['service']}, {r['event_type']})"
                for a in r["attempts"]:
                    text += f"\n  #{a['attempt']} {a['at']}: {a['error']}"
        _emit(args, rows, text)
        return 0
    if args.command == "archive":
        try:
            done = dead_letters.archive(args.service, args.dead_letter_id, args.reason)
        except operator_access.ApiError as exc:
            _say(f"cannot archive: {exc.detail}", error=True)
            return 1 if exc.status == 404 else 2
        _emit(args, done, f"{done['dead_letter_id']} archived by {done['operator']}")
        return 0
    replayer = dead_letters.replayer(args.service, _signing_key, operator_access.kafka(),
                                     dry_run=args.dry_run)
    try:
        if args.command == "replay":
            outcomes = [await replayer.one(args.dead_letter_id, args.fixed_payload)]
        else:
            outcomes = await dead_letters.replay_group(conn, replayer, args.event_type,
                                                       args.error_class, args.limit)
    except CannotSign as exc:
        _say(f"cannot replay: {exc}", error=True)
        return 2
    if args.command == "replay":
        [o] = outcomes
        if getattr(args, "output", "text") == "json":
            _emit(args, o.as_dict(), "")
        elif o.outcome in ("replayed", "would_replay"):
            _say(_outcome_text(o, args.dry_run))
        else:
            _say(_outcome_text(o, args.dry_run), error=True)
        return {"replayed": 0, "would_replay": 0, "forged": 3}.get(o.outcome, 2)
    _emit(args, [o.as_dict() for o in outcomes],
          "\n".join(_outcome_text(o, args.dry_run) for o in outcomes)
          or "(no open letter in that group)")
    return 3 if any(o.outcome == "forged" for o in outcomes) else 0


async def _dead_letters(args: argparse.Namespace) -> int:
    conn = await connection.connect(connection.reader_dsn())
    try:
        return await _dead_letter_command(conn, args)
    finally:
        await conn.close()


def _unused_days(args: argparse.Namespace) -> float:
    given = args.unused_days if args.unused_days is not None else os.environ.get(
        "SAGACTL_SCHEMA_RETIRE_UNUSED_DAYS")
    try:
        days = float(given) if given is not None else lifecycle.DEFAULT_UNUSED_DAYS
    except ValueError:
        raise SystemExit(f"sagactl: SAGACTL_SCHEMA_RETIRE_UNUSED_DAYS: not a number: "
                         f"{given!r}") from None
    if days < 0:
        raise SystemExit("sagactl: the days without use must not be negative")
    return days


async def _lifecycle(args: argparse.Namespace) -> int:
    """deprecate, retire: 0 when done; 1 when retire refused (why on stderr); 2 when the
    registry could not be asked."""
    if len(args.operands) not in (1, 2):
        raise SystemExit(f"sagactl: schemas {args.action} ARTIFACT [VERSION]")
    artifact, version = args.operands[0], (args.operands[1:] or [None])[0]
    try:
        if args.action == "deprecate":
            versions = lifecycle.deprecate(registry("deployer"), args.group, artifact, version)
            uses: list[lifecycle.LastUse] = []
            done = "deprecated"
        else:
            days = _unused_days(args)
            conn = await connection.connect(connection.reader_dsn())
            try:
                versions, uses = await lifecycle.retire(registry("deployer"), conn, args.group,
                                                        artifact, version, days)
            finally:
                await conn.close()
            done = "retired"
    except lifecycle.NotRetired as refused:
        if args.output == "json":
            _json({"refused": str(refused)})
        _say(f"refused: {refused}", error=True)
        return 1
    except RegistryError as exc:
        _say(f"the schema registry could not be asked: {exc}", error=True)
        return 2
    if args.output == "json":
        _json({done: lifecycle.as_json(versions, uses)})
    else:
        for v in versions:
            _say(f"{v.artifact} {v.version}: {done} (was {v.state})")
    return 0


def _schemas(args: argparse.Namespace) -> int:
    """0 when done; 1 when the registry refused a version (its verdict on stderr); 2 when it
    could not be asked."""
    from saga_contracts.catalog import render
    from saga_contracts.registry import all_schemas, load_schemas

    try:
        if args.action == "catalog":
            text = render(schemas.registered_schemas(registry("reader"), args.group))
            if args.operands:
                Path(args.operands[0]).write_text(text)
            else:
                print(text)
            return 0
        wanted = load_schemas(Path(args.schemas)) if args.schemas else all_schemas()
        steps = schemas.register(
            registry("deployer"), wanted, args.group,
            told=(lambda s: None) if args.output == "json" else lambda s: _say(
                f"{s.artifact} {s.version}: {s.outcome}"))
    except schemas.Refused as refused:
        if args.output == "json":
            _json({"refused": {"event_type": refused.schema.event_type,
                               "version": refused.schema.version,
                               "artifact": refused.artifact, "verdict": refused.verdict}})
        _say(f"refused: {refused}", error=True)
        return 1
    except RegistryError as exc:
        _say(f"the schema registry could not be asked: {exc}", error=True)
        return 2
    new = sum(s.outcome == "registered" for s in steps)
    if args.output == "json":
        _json({"registered": [s.__dict__ for s in steps]})
    else:
        _say(f"{len(steps)} schema versions of {len(wanted)} event types in the registry "
             f"({new} new), group {args.group}")
    return 0


async def run(args: argparse.Namespace) -> int:
    if args.command == "schemas":
        if args.action in ("deprecate", "retire"):
            return await _lifecycle(args)
        return _schemas(args)
    if args.command == "signing-key":
        return _print_signing_key(args.output == "json")
    if args.command == "topics":
        return await _topics(create=args.action == "create", as_json=args.output == "json")
    if args.command in ("cancel", "retry", "resolve-payment"):
        return _act(args)
    if args.command in ("dlq", "replay", "replay-group", "archive"):
        return await _dead_letters(args)
    return await _read(args)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="sagactl", description=__doc__.splitlines()[0])
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--output", choices=["text", "json"], default="text",
                        help="text (default) or one JSON document")
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, parents=[common])

    p = command("sagas", "sagas by state and age; --stuck for the stuck ones")
    p.add_argument("--status", action="append")
    p.add_argument("--older-than", type=float, default=0.0, metavar="SECONDS")
    p.add_argument("--stuck", action="store_true")
    p.add_argument("--limit", type=int, default=50)
    p = command("timeline", "one saga's transitions, events, gateway attempts, operators' "
                            "actions and timings")
    p.add_argument("saga_id")
    p = command("payments", "payments; --needing-action for those marked for a manual refund "
                            "and not resolved yet")
    p.add_argument("--needing-action", action="store_true")
    p.add_argument("--saga", metavar="SAGA_ID")
    p.add_argument("--limit", type=int, default=50)
    p = command("cancel", "cancel a saga (pedidos' API, as an operator, audited with the reason)")
    p.add_argument("saga_id")
    p.add_argument("--reason", required=True)
    p = command("retry", "drive a saga's current step again (pedidos' API, as an operator)")
    p.add_argument("saga_id")
    p.add_argument("--reason")
    p = command("resolve-payment", "record that finance settled a payment marked for a manual "
                                   "refund (pagos' API, as an operator)")
    p.add_argument("payment_id")
    p.add_argument("--reference", required=True,
                   help="the finance system's reference of the refund or settlement")
    p.add_argument("--note")
    p = command("dlq", "dead letters with their error history and state")
    p.add_argument("--service", choices=dead_letters.SERVICES)
    p.add_argument("--state", choices=dead_letters.STATES)
    p.add_argument("--group-by", choices=dead_letters.GROUP_KEYS)
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--errors", action="store_true", help="print every attempt's error")
    p = command("replay", "replay a dead letter under a new message id, after checking it "
                          "against the broker")
    p.add_argument("dead_letter_id")
    p.add_argument("--service", choices=dead_letters.SERVICES, required=True)
    p.add_argument("--payload", help="a JSON file with the fixed payload")
    p.add_argument("--dry-run", action="store_true")
    p = command("replay-group", "replay the open dead letters of one service, event type and "
                                "error class")
    p.add_argument("--service", choices=dead_letters.SERVICES, required=True)
    p.add_argument("--event-type", required=True)
    p.add_argument("--error-class", required=True)
    p.add_argument("--limit", type=int, default=100)
    p.add_argument("--dry-run", action="store_true")
    p = command("archive", "put a dead letter aside, with a reason")
    p.add_argument("dead_letter_id")
    p.add_argument("--service", choices=dead_letters.SERVICES, required=True)
    p.add_argument("--reason", required=True)
    command("signing-key", "the public key replays are signed with, as "
            "SAGA_OPERATOR_PUBLIC_KEYS lists it")
    p = command("topics", "the saga's topics on the cluster KAFKA_* names: create "
                "those missing (partitions, replication factor, min ISR from KAFKA_TOPIC_"
                "PARTITIONS, KAFKA_REPLICATION_FACTOR, KAFKA_MIN_INSYNC_REPLICAS), or check")
    p.add_argument("action", choices=["create", "check"])
    p = command("schemas", "the schema registry: register every schema version of the "
                "contracts with their compatibility rules (a deployment step), render the "
                "event catalog from what it holds, deprecate a version, retire one unused")
    p.add_argument("action", choices=["register", "catalog", "deprecate", "retire"])
    p.add_argument("operands", nargs="*", metavar="ARG",
                   help="catalog: [FILE] to write (default: stdout); deprecate, retire: "
                   "ARTIFACT [VERSION] (default: every version of the artifact)")
    p.add_argument("--unused-days", type=float, default=None,
                   help="retire: how long no service may have used it (default "
                   "SAGACTL_SCHEMA_RETIRE_UNUSED_DAYS, else 30)")
    p.add_argument("--schemas", metavar="DIR", help="register: a tree laid out as the "
                   "contracts' schemas/<EventType>/<version>.json (default: the contracts')")
    p.add_argument("--group", default=schema_artifacts.GROUP,
                   help=f"the registry's group of the event schemas (default {schema_artifacts.GROUP})")
    args = parser.parse_args(argv)
    if getattr(args, "payload", None):
        with open(args.payload) as f:
            args.fixed_payload = json.load(f)
    else:
        args.fixed_payload = None
    sys.exit(asyncio.run(run(args)))


if __name__ == "__main__":
    main()
