"""Every operation of each service's OpenAPI document, as the running service serves it, fed what
schemathesis makes of it (its examples, its coverage cases at and past each constraint, and
random valid and invalid data): no answer is a 5xx.

The cases are built and run per operation with the builder schemathesis' pytest plugin uses.
The plugin itself cannot be used here: its lazy loader (``schemathesis.pytest.from_fixture``)
reads a node attribute pytest 9 no longer has, and its eager one would need the stack up
while pytest collects. ``MAX_EXAMPLES`` bounds the random cases of each operation: a service
takes seconds.
"""

from __future__ import annotations

from collections.abc import Callable

import hypothesis
import pytest
import schemathesis
from hypothesis import HealthCheck
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.generation.hypothesis.builder import (
    HypothesisTestConfig,
    HypothesisTestMode,
    create_test,
)

from saga_harness import config, identity

SERVICES = {"pedidos": config.PEDIDOS, "inventario": config.INVENTARIO, "pagos": config.PAGOS}
MAX_EXAMPLES = 200  # random cases per operation, on top of its examples and coverage cases


def _checked(calls: list[str]) -> Callable[[Case], None]:
    def check(case: Case) -> None:
        calls.append(case.operation.label)
        # Authenticated, so that the cases reach the routes' own validation: a new order as a
        # customer (operators place none), anything else as an operator.
        token = (identity.customer_token(identity.ANY_CUSTOMER)
                 if case.operation.label == "POST /orders" else identity.operator_token())
        case.call_and_validate(headers=identity.bearer(token), checks=[not_a_server_error])
    return check


@pytest.mark.parametrize("service", SERVICES)
def test_no_request_the_openapi_document_allows_or_refuses_is_a_server_error(
        running_stack: None, service: str) -> None:
    schema = schemathesis.openapi.from_url(f"{SERVICES[service]}/openapi.json")
    schema.config.generation.update(modes=list(GenerationMode), max_examples=MAX_EXAMPLES)
    settings = hypothesis.settings(max_examples=MAX_EXAMPLES, deadline=None, database=None,
                                   suppress_health_check=list(HealthCheck))
    calls: list[str] = []
    failures: dict[str, str] = {}
    operations = [result.ok() for result in schema.get_all_operations()]
    for operation in operations:
        run = create_test(operation=operation, test_func=_checked(calls),
                          config=HypothesisTestConfig(project=schema.config,
                                                      modes=list(HypothesisTestMode),
                                                      settings=settings))
        try:
            run()
        # Every operation is tried and every failure reported (schemathesis reports its own
        # as a BaseExceptionGroup).
        except (Exception, BaseExceptionGroup) as exc:
            failures[operation.label] = f"{type(exc).__name__}: {exc}"
    assert not failures, "\n\n".join(f"{label}\n{report}" for label, report in failures.items())
    # Each operation was called: a document that lost its operations tests nothing.
    assert {op.label for op in operations} <= set(calls), set(calls)
    assert len(operations) >= 4
