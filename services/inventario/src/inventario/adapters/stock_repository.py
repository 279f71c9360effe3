"""inventario's stores on PostgreSQL: ``StockStore`` and ``ProductStore`` bound to a unit of work.

Reads go to the unit of work's connection; a write the protocol says is recorded with the
commit is staged on the unit of work (``UnitOfWork.stage``) and sent with its commit statement,
so that a saga step is one or two round trips: the read, then the commit statement that is its
whole transaction (ADR 0002), guarded when the read may be stale by then (ADR 0005). The
allocation's two run in a transaction of their own, BEGIN and COMMIT around them, so that its
read can give its commit statement, which waits for locks, a longer statement timeout. The other
writes run on the connection, in the transaction the unit of work commits.

The statements a saga step runs are built once and their values bound at execution: building a
statement and its cache key costs more CPU than sending it (it showed in pedidos' profile).
Statements written as text name their tables ``{schema}.table``, rendered with the unit of
work's schema as the unit of work renders its staged writes: a copy of the tables in another
schema (tests/harness/db.py's ``scratch_copy``) is read and written whole.

The statements that lock products and then decide on their units (a reserving check, an
allocation) read what other sagas hold reserved through ``inventario.reserved_by_others``
(migration 0009), which reads with a snapshot of its own, taken once the lock is held.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from decimal import Decimal
from functools import cache
from typing import Any

from sqlalchemy import Integer, Text, TextClause, bindparam, func, select, text, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from inventario.adapters.tables import allocations, products, reservations, stock_checks
from inventario.domain.allocation_strategy import AllocationStrategy
from inventario.domain.payment_match import Money
from inventario.domain.stock import AllocationStatus, Line
from inventario.usecases.ports import AllocationState, ProductStock, RecordedCheck, ValidationRead
from saga_contracts.events import parse
from saga_contracts.events.base import Event
from sagakit import jsonio
from sagakit.store import Part, StagedWrite, UnitOfWork, WriteShape, driver


def _live(alias: str) -> str:
    """A reservation that holds units: RESERVED, its deadline ahead (the database clock)."""
    return f"{alias}.status = 'RESERVED' AND {alias}.expires_at > now()"


# The units of a product that Check-Then-Pay orders in flight are on their way to take: other
# sagas' verified checks within the window, neither allocated nor holding a live reservation
# (migrations 0010 and 0012: found by the product, through an index on the checks' lines). A
# function with a snapshot of its own: called once the product is locked, it counts a check
# committed while the lock was waited for.
_CHECKED_IN_FLIGHT = ("inventario.checked_in_flight(:{schema}, {sku}, :{saga}, "
                      "CAST(:{window} AS double precision))")

_IN_FLIGHT_AT_READ = _CHECKED_IN_FLIGHT.format(schema="k_schema", saga="k_saga_id",
                                              window="k_ttl_s", sku="p.sku")

# Validation's questions in one round trip: has the saga an allocation row already (it was
# cancelled before it was validated), its recorded check, the database clock, and, per product
# asked about, what is on hand at which catalog price, the units other sagas hold in live
# reservations, its strategy and, for an ``auto`` product only, the units of Check-Then-Pay
# orders in flight (``_CHECKED_IN_FLIGHT``). The one-row side of the outer join keeps an
# answer when none of the products exists.
_VALIDATION_READ = f"""SELECT
    (SELECT status FROM {{schema}}.{allocations.name} WHERE saga_id = :k_saga_id) AS allocation,
    c.result AS check_result, c.answer AS check_answer, now() AS db_now,
    p.sku, p.quantity, p.price, p.currency, p.allocation_strategy,
    (SELECT coalesce(sum(r.quantity), 0)::int FROM {{schema}}.{reservations.name} AS r
     WHERE r.sku = p.sku AND {_live('r')} AND r.saga_id <> :k_saga_id) AS reserved,
    CASE WHEN p.allocation_strategy = '{AllocationStrategy.AUTO.value}' THEN
      {_IN_FLIGHT_AT_READ}
    END AS in_flight
FROM (SELECT 1) AS one
LEFT JOIN {{schema}}.{stock_checks.name} AS c ON c.saga_id = :k_saga_id
LEFT JOIN {{schema}}.{products.name} AS p ON p.sku = ANY (CAST(:skus AS text[]))"""


@cache
def _validation_read(schema: str) -> TextClause:
    return text(_VALIDATION_READ.replace("{schema}", f'"{schema}"'))


_PUT_BACK = (pg_insert(products)
             .values(sku=bindparam("v_sku", type_=Text),
                     quantity=bindparam("v_quantity", type_=Integer))
             .on_conflict_do_update(index_elements=[products.c.sku],
                                    set_={"quantity": products.c.quantity
                                          + bindparam("v_quantity", type_=Integer),
                                          "updated_at": func.now()}))
# What the allocation decides on, read without a lock: the lines validated for the saga and the
# payment its check asked for, its allocation row's status, and, if it has none, the lines'
# products on hand. It also sets the statement timeout of the rest of its transaction (the
# allocation's commit statement, which waits for locks): read in the WHERE, so that it is
# evaluated whatever the planner makes of an unused column. The
# products are found by their primary key (= ANY of an array: an IN over the lines' SKUs was
# planned as a scan of every product).
_ALLOCATION_READ = f"""SELECT c.items AS checked, c.payment_amount, c.payment_currency,
       a.status AS allocation, p.sku, p.quantity, p.reserved,
       EXISTS (SELECT 1 FROM {{schema}}.{reservations.name} AS s
               WHERE s.saga_id = :k_saga_id AND {_live('s')}) AS reservation_live
FROM (SELECT set_config('statement_timeout', :k_statement_timeout, true) AS timeout) AS one
LEFT JOIN {{schema}}.{stock_checks.name} AS c ON c.saga_id = :k_saga_id
LEFT JOIN {{schema}}.{allocations.name} AS a ON a.saga_id = :k_saga_id
LEFT JOIN LATERAL (SELECT sku, quantity,
                          (SELECT coalesce(sum(r.quantity), 0)::int
                           FROM {{schema}}.{reservations.name} AS r
                           WHERE r.sku = pr.sku AND {_live('r')} AND r.saga_id <> :k_saga_id
                          ) AS reserved
                   FROM {{schema}}.{products.name} AS pr
                   WHERE a.status IS NULL
                     AND sku = ANY (ARRAY(SELECT l->>'sku'
                                          FROM jsonb_array_elements(c.items) AS l))) AS p ON true
WHERE one.timeout IS NOT NULL"""


@cache
def _allocation_read(schema: str) -> TextClause:
    """``_ALLOCATION_READ`` on the tables of ``schema``, built once per schema."""
    return text(_ALLOCATION_READ.replace("{schema}", f'"{schema}"'))


# Writes staged on the unit of work, sent with its commit statement (sagakit.store.unit_of_work).
# Guarded ("checked"): a check recorded for the saga meanwhile (its OrdenSolicitada handled
# twice at once: a replay beside the original) keeps its place, and this unit of work writes
# nothing, its answer included.
_CHECKED = Part("checked", """INSERT INTO {stock_checks}
    (saga_id, order_id, items, result, payment_amount, payment_currency, answer)
VALUES (:chk_saga_id, :chk_order_id, CAST(:chk_items AS jsonb), :chk_result,
        :chk_payment_amount, :chk_payment_currency, CAST(:chk_answer AS jsonb))
ON CONFLICT (saga_id) DO NOTHING
RETURNING saga_id""", stock_checks)
_STOCK_CHECK = WriteShape(_CHECKED, guard=_CHECKED)
# The units other sagas hold in live reservations on product ``l.sku``, by a function that reads
# them with a snapshot of its own (migration 0009): called once the product is locked, it
# counts a reservation that committed while the lock was waited for, which a subquery of the
# same statement, on the snapshot the statement began with, would miss.
_HELD_BY_OTHERS = "inventario.reserved_by_others(:held_schema, l.sku, :{saga})"
_IN_FLIGHT_LOCKED = _CHECKED_IN_FLIGHT.format(schema="held_schema", saga="chk_saga_id",
                                             window="auto_window_s", sku="l.sku")


# Parts the statements that lock products share (the two checks below; the allocation asks
# for the units wanted too), each named as the statement it is a part of names it.
def _wanted(name: str, items: str) -> Part:
    """The units asked for per SKU, from the lines in the JSON value bound as ``items``
    (lines of the same SKU count together)."""
    return Part(name, f"""SELECT l.sku, sum(l.quantity)::int AS quantity
FROM jsonb_to_recordset(CAST(:{items} AS jsonb)) AS l(sku text, quantity int)
GROUP BY l.sku""")


def _locked(prefix: str, columns: str, *, auto_only: bool = False) -> Part:
    """``{prefix}_wanted``'s products (its ``auto`` ones only, if ``auto_only``), locked in SKU
    order: the order every statement that locks products locks them in."""
    only = (f"\n  AND allocation_strategy = '{AllocationStrategy.AUTO.value}'" if auto_only
            else "")
    return Part(f"{prefix}_locked", f"""SELECT {columns} FROM {{products}}
WHERE sku = ANY (ARRAY(SELECT sku FROM {prefix}_wanted)){only}
ORDER BY sku
FOR UPDATE""", products)


def _checked_if(agreed: str) -> Part:
    """The check, recorded only if the part ``agreed`` returned its row and the saga has none
    yet: the guard of a check that locks products."""
    return Part("checked", f"""INSERT INTO {{stock_checks}}
    (saga_id, order_id, items, result, payment_amount, payment_currency, answer)
SELECT :chk_saga_id, CAST(:chk_order_id AS uuid), CAST(:chk_items AS jsonb), :chk_result,
       CAST(:chk_payment_amount AS numeric), :chk_payment_currency,
       CAST(:chk_answer AS jsonb)
FROM {agreed}
ON CONFLICT (saga_id) DO NOTHING
RETURNING saga_id""", stock_checks)


# A verified check that reserves, in one statement: the lines' products locked in SKU order (as
# the allocation locks them: no deadlock between the two), what other sagas hold read under the
# lock, then the check and the reservation written only if every line still has its units and
# the saga has no check yet. An ``auto`` product's units also leave those of the Check-Then-Pay
# orders in flight, read under the lock too: they are on their way to take them, and a
# reservation that took them would make them lose their race after their charge. Otherwise
# nothing is written and the message is handled again, on what another saga took meanwhile.
_RESERVING_CHECK = WriteShape(
    _wanted("res_wanted", "chk_items"),
    _locked("res", "sku, quantity, allocation_strategy"),
    Part("res_held", f"""SELECT l.sku, l.quantity - {_HELD_BY_OTHERS.format(saga="chk_saga_id")}
       - CASE WHEN l.allocation_strategy = '{AllocationStrategy.AUTO.value}'
              THEN {_IN_FLIGHT_LOCKED} ELSE 0 END AS units
FROM res_locked AS l"""),
    Part("res_agreed", """SELECT 1 AS agreed
WHERE NOT EXISTS (SELECT 1 FROM res_wanted w LEFT JOIN res_held h ON h.sku = w.sku
                  WHERE coalesce(h.units, 0) < w.quantity)"""),
    (_RESERVING_CHECKED := _checked_if("res_agreed")),
    Part("reserved", """INSERT INTO {reservations}
    (saga_id, sku, quantity, status, expires_at)
SELECT :chk_saga_id, w.sku, w.quantity, 'RESERVED', CAST(:res_expires_at AS timestamptz)
FROM res_wanted AS w, checked
ON CONFLICT (saga_id, sku) DO NOTHING
RETURNING sku""", reservations),
    guard=_RESERVING_CHECKED)
# A verified check that does not reserve although a line's product is ``auto``: the ``auto``
# rule asked again under the products' lock (``auto`` ones only, in SKU order), on what other
# sagas hold and the Check-Then-Pay orders in flight read after the lock. Validations of the
# product thus decide one after the other, each on every check committed before it, however many
# ran at once (in shared transactions too, whose checks count once they commit): a burst's
# orders see the burst. If the rule now says reserve, nothing is written and the message is
# handled again: its read sees what it missed, and it reserves.
_AUTO_CHECK = WriteShape(
    _wanted("auto_wanted", "chk_items"),
    _locked("auto", "sku, quantity", auto_only=True),
    Part("auto_seen", f"""SELECT l.sku,
       greatest(l.quantity - {_HELD_BY_OTHERS.format(saga="chk_saga_id")}, 0) AS available,
       {_IN_FLIGHT_LOCKED} AS in_flight
FROM auto_locked AS l"""),
    # inventario.domain.allocation_strategy.reserves, in the same arithmetic (double precision).
    Part("auto_agreed", """SELECT 1 AS agreed
WHERE NOT EXISTS (SELECT 1 FROM auto_seen s JOIN auto_wanted w ON w.sku = s.sku
                  WHERE s.in_flight + w.quantity
                        >= CAST(:auto_ratio AS double precision) * s.available)"""),
    (_AUTO_CHECKED := _checked_if("auto_agreed")),
    guard=_AUTO_CHECKED)
# The allocation, decided on what ``_ALLOCATION_READ`` found, in one statement, the last of the
# transaction that read began. It sets its lock timeout first (a subquery every later part
# reads, LATERAL, so that it is evaluated before any lock is waited for), then locks the lines'
# products in SKU order (two allocations that share products lock them in the same order) and
# reads them as the last transaction to change them left them. The saga's allocation row goes
# in only if the locked units agree with the decision (every line has its units for ALLOCATED, some line has
# too few for FAILED) and no allocation was recorded for the saga meanwhile; only then are the
# units taken (the UPDATE joins what the INSERT returned). Otherwise nothing is written and
# the consumer handles the message again, reading what changed. Lines of the same SKU count
# together. The products are found by their primary key (= ANY of an array), as in the read:
# joined to the lines alone, which PostgreSQL guesses at a hundred rows, the update was
# planned as a scan of the whole catalogue, whose cost grew with every product added (7.7 ms
# of a 9 ms statement with 4,900 products).
_ALLOCATION = WriteShape(
    Part("alloc_timeout", """SELECT set_config('lock_timeout', :alloc_lock_timeout, true) AS value"""),
    _wanted("wanted", "alloc_items"),
    Part("locked", """SELECT p.sku, p.quantity
FROM alloc_timeout AS t
CROSS JOIN LATERAL (SELECT sku, quantity FROM {products}
                    WHERE t.value IS NOT NULL AND sku = ANY (ARRAY(SELECT sku FROM wanted))
                    ORDER BY sku
                    FOR UPDATE) AS p""", products),
    # What other sagas hold, read once the product is locked, with a snapshot of its own
    # (``_HELD_BY_OTHERS``): a reservation committed while this waited for the lock counts.
    Part("held", f"""SELECT l.sku, l.quantity - {_HELD_BY_OTHERS.format(saga="alloc_saga_id")} AS units
FROM locked AS l"""),
    Part("agreed", f"""SELECT 1 AS agreed
WHERE (NOT EXISTS (SELECT 1 FROM wanted w LEFT JOIN held h ON h.sku = w.sku
                   WHERE coalesce(h.units, 0) < w.quantity))
      = (:alloc_status = '{AllocationStatus.ALLOCATED.value}')"""),
    (_RECORDED := Part("recorded", """INSERT INTO {allocations} (saga_id, order_id, status, items)
SELECT :alloc_saga_id, CAST(:alloc_order_id AS uuid), :alloc_status, CAST(:alloc_items AS jsonb)
FROM agreed
ON CONFLICT (saga_id) DO NOTHING
RETURNING saga_id""", allocations)),
    Part("taken", f"""UPDATE {{products}} p
SET quantity = p.quantity - w.quantity, updated_at = now()
FROM wanted w, recorded r
WHERE p.sku = ANY (ARRAY(SELECT sku FROM wanted)) AND p.sku = w.sku
  AND :alloc_status = '{AllocationStatus.ALLOCATED.value}'
RETURNING p.sku""", products),
    # The saga's reservation, if it still holds one, is what was just taken: confirmed. Any
    # RESERVED row, its deadline passed or not: the units it held are the ones taken, and a
    # row the expiry job marked EXPIRED meanwhile stays so. What it returns is what the
    # metrics count. After the allocation's row, in the order a cancellation takes them (no
    # deadlock between the two).
    (_CONFIRMED := Part("confirmed", f"""UPDATE {{reservations}} AS r
SET status = 'CONFIRMED', updated_at = now()
FROM recorded
WHERE r.saga_id = :alloc_saga_id AND r.status = 'RESERVED'
  AND :alloc_status = '{AllocationStatus.ALLOCATED.value}'
RETURNING r.sku""", reservations)),
    guard=_RECORDED, returning=_CONFIRMED)
_LOCK_ALLOCATION = (select(allocations.c.status, allocations.c["items"])
                    .where(allocations.c.saga_id == bindparam("k_saga_id", type_=Text))
                    .with_for_update())
_INSERT_ALLOCATION = (pg_insert(allocations)
                      .values(saga_id=bindparam("v_saga_id", type_=Text),
                              order_id=bindparam("v_order_id",
                                                 type_=allocations.c.order_id.type),
                              status=bindparam("v_status", type_=Text),
                              items=bindparam("v_items", type_=JSONB))
                      .on_conflict_do_nothing(index_elements=[allocations.c.saga_id])
                      .returning(allocations.c.saga_id))
_TRANSITION_ALLOCATION = (update(allocations)
                          .where(allocations.c.saga_id == bindparam("k_saga_id", type_=Text),
                                 allocations.c.status == bindparam("k_expected", type_=Text))
                          .values(status=bindparam("v_status", type_=Text),
                                  updated_at=func.now()))


# A cancellation that finds the saga unvalidated closes its check: a validation that read
# before the cancellation committed then finds this row where its own (and its reservation)
# would go, and writes nothing (its guard); handled again, it reads the saga blocked. A check
# recorded first is kept.
_CLOSE_CHECK = (pg_insert(stock_checks)
                .values(saga_id=bindparam("v_saga_id", type_=Text),
                        order_id=bindparam("v_order_id", type_=stock_checks.c.order_id.type),
                        items=[], result="cancelled")
                .on_conflict_do_nothing(index_elements=[stock_checks.c.saga_id]))
_RELEASE_RESERVATION = (update(reservations)
                        .where(reservations.c.saga_id == bindparam("k_saga_id", type_=Text),
                               reservations.c.status == "RESERVED")
                        .values(status="RELEASED", updated_at=func.now()))
_LOCK_PRODUCT = (select(products.c.sku)
                 .where(products.c.sku == bindparam("k_sku", type_=Text))
                 .with_for_update())
# A product's units held by live reservations (the HTTP query's).
_RESERVED_UNITS = (select(func.coalesce(func.sum(reservations.c.quantity), 0))
                   .where(reservations.c.sku == products.c.sku,
                          reservations.c.status == "RESERVED",
                          reservations.c.expires_at > func.now())
                   .scalar_subquery())


def lines_to_json(lines: list[Line]) -> list[dict[str, Any]]:
    return [{"sku": line.sku, "quantity": line.quantity} for line in lines]


def lines_from_json(items: list[dict[str, Any]]) -> list[Line]:
    return [Line(i["sku"], int(i["quantity"])) for i in items]


async def find_product(conn: AsyncConnection, sku: str) -> ProductStock | None:
    """The product's units on hand and price, on any connection (the HTTP query has no unit of
    work)."""
    row = (await conn.execute(select(products, _RESERVED_UNITS.label("reserved"))
                              .where(products.c.sku == sku))).first()
    if row is None:
        return None
    return ProductStock(sku=row.sku, quantity=row.quantity, updated_at=row.updated_at,
                        price=_price(row.price, row.currency), reserved=int(row.reserved),
                        allocation_strategy=AllocationStrategy(row.allocation_strategy))


def _answer_from(recorded: Any) -> Event | None:
    """The event a check recorded as its answer (None: recorded before answers were kept)."""
    if recorded is None:
        return None
    return parse(recorded["event_type"], recorded["payload"])


def _price(amount: Decimal | None, currency: str | None) -> Money | None:
    return None if amount is None or currency is None else Money(amount, currency)


class StockRepository:
    """``StockStore`` and ``ProductStore`` on the unit of work's connection and commit."""

    def __init__(self, uow: UnitOfWork) -> None:
        self.uow = uow

    @property
    def conn(self) -> AsyncConnection:
        return self.uow.connection

    # ---- stock checks

    async def validation_read(self, saga_id: str, skus: list[str], *,
                              in_flight_window_s: float = 120.0) -> ValidationRead:
        """The saga's allocation status (None: no row), its check, the database clock and,
        per product of ``skus`` (absent ones left out), its units on hand, catalog price,
        strategy, units held by other sagas and, if ``auto``, units in flight: one statement,
        without locks."""
        rows = await driver.fetch(self.conn, _validation_read(self.uow.tables.schema),
                                  {"k_saga_id": saga_id, "skus": list(skus),
                                   "k_ttl_s": float(in_flight_window_s),
                                   "k_schema": self.uow.tables.schema})
        first = rows[0]
        status = first["allocation"]
        found = [r for r in rows if r["sku"] is not None]
        prices = {r["sku"]: _price(r["price"], r["currency"]) for r in found}
        return ValidationRead(
            allocation=AllocationStatus(status) if status is not None else None,
            on_hand={r["sku"]: r["quantity"] for r in found},
            prices={sku: price for sku, price in prices.items() if price is not None},
            check=(None if first["check_result"] is None else
                   RecordedCheck(first["check_result"], _answer_from(first["check_answer"]))),
            reserved={r["sku"]: r["reserved"] for r in found if r["reserved"]},
            strategies={r["sku"]: AllocationStrategy(r["allocation_strategy"]) for r in found},
            in_flight={r["sku"]: r["in_flight"] for r in found if r["in_flight"] is not None},
            now=first["db_now"])

    def record_check(self, saga_id: str, order_id: str, lines: list[Line], result: str,
                     payment_requested: Money | None, answer: Event) -> None:
        """The check's record (lines, result, the payment it asks for and the event it answers
        with), staged: it goes with the commit statement, guarded, written only if the saga
        has no check yet."""
        self.uow.stage(StagedWrite(_STOCK_CHECK, {
            "chk_saga_id": saga_id, "chk_order_id": uuid.UUID(order_id),
            "chk_items": jsonio.dumps(lines_to_json(lines)), "chk_result": result,
            "chk_payment_amount": payment_requested.amount if payment_requested else None,
            "chk_payment_currency": (payment_requested.currency if payment_requested
                                     else None),
            "chk_answer": jsonio.dumps({"event_type": answer.event_type,
                                        "payload": answer.to_payload()})}))

    def record_reserving_check(self, saga_id: str, order_id: str, lines: list[Line],
                               payment_requested: Money, answer: Event,
                               expires_at: datetime, *, in_flight_window_s: float = 120.0
                               ) -> None:
        """The verified check's record and the saga's reservation until ``expires_at``,
        staged: the commit statement locks the lines' products and writes both only if every
        line still has its units beside other sagas' live reservations (and, for an ``auto``
        product, the Check-Then-Pay orders in flight) and the saga has no check yet (the
        guard)."""
        self.uow.stage(StagedWrite(_RESERVING_CHECK, {
            **self._verified(saga_id, order_id, lines, payment_requested, answer),
            "res_expires_at": expires_at, "auto_window_s": float(in_flight_window_s)}))

    def record_auto_check(self, saga_id: str, order_id: str, lines: list[Line],
                          payment_requested: Money, answer: Event, *, ratio: float,
                          in_flight_window_s: float = 120.0) -> None:
        """A verified check that does not reserve, staged: the commit statement locks the
        lines' ``auto`` products and writes it only if the ``auto`` rule, asked again on what
        it reads under the lock, still says not to reserve, and the saga has no check yet
        (the guard)."""
        self.uow.stage(StagedWrite(_AUTO_CHECK, {
            **self._verified(saga_id, order_id, lines, payment_requested, answer),
            "auto_window_s": float(in_flight_window_s), "auto_ratio": float(ratio)}))

    def _verified(self, saga_id: str, order_id: str, lines: list[Line],
                  payment_requested: Money, answer: Event) -> dict[str, Any]:
        """The values of a verified check's record, for the statements that lock products."""
        return {
            "chk_saga_id": saga_id, "chk_order_id": uuid.UUID(order_id),
            "chk_items": jsonio.dumps(lines_to_json(lines)), "chk_result": "verified",
            "chk_payment_amount": payment_requested.amount,
            "chk_payment_currency": payment_requested.currency,
            "chk_answer": jsonio.dumps({"event_type": answer.event_type,
                                        "payload": answer.to_payload()}),
            "held_schema": self.uow.tables.schema}

    # ---- allocations

    async def allocation_state(self, saga_id: str, *, statement_timeout_ms: int
                               ) -> AllocationState:
        """The lines validated for the saga, the payment its check asked for, its allocation
        and, if it has none, the lines' products on hand: one statement, without locks, which
        sets the statement timeout of the rest of its transaction (``SET LOCAL``: nothing to
        undo, and none outside a transaction)."""
        rows = await driver.fetch(self.conn, _allocation_read(self.uow.tables.schema),
                                  {"k_saga_id": saga_id,
                                   "k_statement_timeout": f"{int(statement_timeout_ms)}ms"})
        first = rows[0]
        return AllocationState(
            checked=(lines_from_json(first["checked"]) if first["checked"] is not None
                     else None),
            payment_requested=(Money(first["payment_amount"], first["payment_currency"])
                               if first["payment_amount"] is not None else None),
            allocation=(AllocationStatus(first["allocation"])
                        if first["allocation"] is not None else None),
            on_hand={r["sku"]: r["quantity"] for r in rows if r["sku"] is not None},
            reserved={r["sku"]: r["reserved"] for r in rows
                      if r["sku"] is not None and r["reserved"]},
            reservation_live=bool(first["reservation_live"]))

    def record_allocation(self, saga_id: str, order_id: str, status: AllocationStatus,
                          lines: list[Line], *, lock_timeout_ms: int) -> None:
        """The saga's allocation row, ``ALLOCATED`` (the lines' units taken off their products)
        or ``FAILED`` (nothing taken), staged on the unit of work: its commit statement writes
        it only if the products, locked, agree and no allocation was recorded for the saga
        meanwhile (the guard: ``commit`` returns False otherwise). A lock waited for longer
        than ``lock_timeout_ms`` fails the statement (SQLSTATE 55P03)."""
        self.uow.stage(StagedWrite(_ALLOCATION, {
            "alloc_lock_timeout": f"{int(lock_timeout_ms)}ms",
            "alloc_saga_id": saga_id, "alloc_order_id": order_id, "alloc_status": status.value,
            "alloc_items": jsonio.dumps(lines_to_json(lines)),
            "held_schema": self.uow.tables.schema}))

    def reservations_confirmed(self) -> int:
        """Once the allocation committed: the saga's reservations its statement confirmed."""
        return len(self.uow.returned)

    async def lock_allocation(self, saga_id: str) -> tuple[AllocationStatus, list[Line]] | None:
        rows = await driver.fetch(self.conn, _LOCK_ALLOCATION, {"k_saga_id": saga_id})
        return ((AllocationStatus(rows[0]["status"]), lines_from_json(rows[0]["items"]))
                if rows else None)

    async def block(self, saga_id: str, order_id: str) -> bool:
        if not await self.insert_allocation(saga_id, order_id, AllocationStatus.BLOCKED, []):
            return False
        await self.conn.execute(_CLOSE_CHECK, {"v_saga_id": saga_id,
                                               "v_order_id": uuid.UUID(order_id)})
        return True

    async def release(self, saga_id: str, lines: list[Line]) -> None:
        await self.put_back(lines)
        await self.transition_allocation(saga_id, AllocationStatus.ALLOCATED,
                                         AllocationStatus.RELEASED)

    async def release_reservation(self, saga_id: str) -> int:
        res = await self.conn.execute(_RELEASE_RESERVATION, {"k_saga_id": saga_id})
        return int(res.rowcount)

    async def insert_allocation(self, saga_id: str, order_id: str | None,
                                status: AllocationStatus, lines: list[Line]) -> bool:
        """False when another transaction recorded the saga's allocation first."""
        res = await self.conn.execute(_INSERT_ALLOCATION, {
            "v_saga_id": saga_id, "v_order_id": uuid.UUID(order_id) if order_id else None,
            "v_status": status.value, "v_items": lines_to_json(lines)})
        return res.first() is not None

    async def put_back(self, lines: list[Line]) -> None:
        """Adds units back; a product deleted meanwhile is recreated with them."""
        for line in lines:
            await self.conn.execute(_PUT_BACK, {"v_sku": line.sku, "v_quantity": line.quantity})

    async def transition_allocation(self, saga_id: str, expected: AllocationStatus,
                                    new: AllocationStatus) -> bool:
        res = await self.conn.execute(_TRANSITION_ALLOCATION, {
            "k_saga_id": saga_id, "k_expected": expected.value, "v_status": new.value})
        return res.rowcount == 1

    # ---- products

    async def set_product(self, sku: str, quantity: int, price: Money | None,
                          strategy: AllocationStrategy | None = None) -> None:
        values: dict[str, Any] = {"quantity": quantity}
        if price is not None:
            values.update(price=price.amount, currency=price.currency)
        if strategy is not None:
            values["allocation_strategy"] = strategy.value
        stmt = pg_insert(products).values(sku=sku, **values)
        await self.conn.execute(stmt.on_conflict_do_update(
            index_elements=[products.c.sku], set_={**values, "updated_at": func.now()}))

    async def product(self, sku: str) -> ProductStock | None:
        return await find_product(self.conn, sku)

    async def lock_product(self, sku: str) -> ProductStock | None:
        """Two statements: the lock, then the product read on a snapshot taken after it."""
        await self.conn.execute(_LOCK_PRODUCT, {"k_sku": sku})
        return await find_product(self.conn, sku)

