"""The naming rule of docs/architecture.md holds: the glossary lists every event, order state and
wire code the contracts define, and a handler of one event is named ``on_<event in snake case>``
(``on_orden_solicitada``), so the name says which event it handles."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import get_args

from pedidos.domain.order import OrderStatus
from saga_contracts import topics
from saga_contracts.events.inventory import PriceProblem, PriceProblem_v2
from saga_contracts.events.orders import CancellationReason, TimedOutStep
from saga_contracts.registry import all_schemas

ROOT = Path(__file__).resolve().parents[1]
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def glossary() -> str:
    text = ARCHITECTURE.read_text()
    start = text.index("## Naming: the standard's words and ours")
    return text[start:text.index("\n## ", start + 1)]


def wire_words() -> set[str]:
    return {*all_schemas(), *(s.value for s in OrderStatus), *get_args(CancellationReason),
            *get_args(TimedOutStep), *get_args(PriceProblem), *get_args(PriceProblem_v2),
            *topics.DOMAIN_TOPICS}


def snake(event_type: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event_type).lower()


def handler_names() -> list[tuple[str, str, str]]:
    """(file, function, event) of every function of a service's ``entrypoints/messages.py``
    that takes a ``Message[<one event>]``."""
    events = set(all_schemas())
    found = []
    for path in sorted(ROOT.glob("services/*/src/*/entrypoints/messages.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for arg in node.args.args:
                ann = arg.annotation
                if (isinstance(ann, ast.Subscript) and isinstance(ann.value, ast.Name)
                        and ann.value.id == "Message" and isinstance(ann.slice, ast.Name)
                        and ann.slice.id in events):
                    found.append((str(path.relative_to(ROOT)), node.name, ann.slice.id))
    return found


def test_the_glossary_lists_every_event_state_and_wire_code() -> None:
    listed = set(re.findall(r"`([^`]+)`", glossary()))
    assert not wire_words() - listed, sorted(wire_words() - listed)


def test_a_handler_of_one_event_is_named_after_it() -> None:
    handlers = handler_names()
    assert len(handlers) >= 6  # inventario's three and pagos' four, at least
    wrong = [f"{file}: {name} handles {event}" for file, name, event in handlers
             if name != f"on_{snake(event)}"]
    assert not wrong, "\n".join(wrong)


def test_snake_case_of_an_event_type() -> None:
    assert snake("OrdenSolicitada") == "orden_solicitada"
    assert snake("StepTimedOut") == "step_timed_out"
