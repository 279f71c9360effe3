"""docs/configuration.md is what deploy/configuration.py renders, and it documents every setting.

A setting is documented when its pydantic field has a description, or, for a variable read with
``os.environ``, when it has a row in one of the generator's tables. Every settings class and every
``os.environ`` read in the project's code (tests aside) must be known to the generator.
"""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Iterator
from pathlib import Path

from saga_harness import scripts

configuration = scripts.load("deploy/configuration.py", "configuration")
ROOT = Path(__file__).resolve().parents[2]
# The project's code outside its tests: what a deployment, an operator or a benchmark runs.
CODE = ["libs/*/src", "services/*/src", "tools/*/src", "deploy"]
REGENERATE = f"run: uv run {configuration.COMMAND} (or make docs)"


def _code_files() -> Iterator[Path]:
    for pattern in CODE:
        for top in sorted(ROOT.glob(pattern)):
            for path in sorted(top.rglob("*.py")):
                parts = path.relative_to(ROOT).parts
                if not {"tests", ".venv", "__pycache__"} & set(parts):
                    yield path


def _is_os_environ(node: ast.expr) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ"
            and isinstance(node.value, ast.Name) and node.value.id == "os")


def _name(node: ast.expr) -> str:
    """The variable's name; ``*`` for each part an f-string computes."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "*" for v in node.values)
    return f"<computed: {ast.unparse(node)}>"


def environment_reads(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """``os.environ.get(X)``, ``os.getenv(X)``, ``os.environ[X]`` and ``X in os.environ``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            func = node.func
            if ((func.attr == "get" and _is_os_environ(func.value))
                    or (func.attr == "getenv" and isinstance(func.value, ast.Name)
                        and func.value.id == "os")):
                yield _name(node.args[0]), node.lineno
        elif (isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load)
              and _is_os_environ(node.value)):
            yield _name(node.slice), node.lineno
        elif (isinstance(node, ast.Compare) and len(node.ops) == 1
              and isinstance(node.ops[0], ast.In | ast.NotIn) and _is_os_environ(node.comparators[0])):
            yield _name(node.left), node.lineno


def _all_reads() -> dict[str, list[str]]:
    reads: dict[str, list[str]] = {}
    for path in _code_files():
        for name, line in environment_reads(ast.parse(path.read_text(), str(path))):
            reads.setdefault(name, []).append(f"{path.relative_to(ROOT)}:{line}")
    return reads


def _documented() -> set[str]:
    return {variable.name for _, variable in configuration.variables()}


def _matches(read: str, documented: str) -> bool:
    """A read of ``*_*_PASSWORD`` is documented as ``<SERVICE>_OWNER_PASSWORD``."""
    return fnmatch.fnmatchcase(documented, read)


def test_the_configuration_docs_are_generated_from_the_settings() -> None:
    assert (ROOT / "docs/configuration.md").read_text() == configuration.render(), REGENERATE


def test_every_setting_has_a_description() -> None:
    missing = [f"{table.source()} {variable.name}" for table, variable in configuration.variables()
               if not variable.description.strip()]
    assert not missing, "settings without a description (Field(description=...)):\n" + \
        "\n".join(missing)


def test_every_settings_class_is_documented() -> None:
    known = {cls.__name__ for cls in configuration.settings_classes()}
    found = []
    for path in _code_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and any(
                    (isinstance(b, ast.Name) and b.id == "BaseSettings")
                    or (isinstance(b, ast.Attribute) and b.attr == "BaseSettings")
                    for b in node.bases):
                found.append((node.name, f"{path.relative_to(ROOT)}:{node.lineno}"))
    assert found, "no settings class found: has the scan lost its way?"
    unknown = [f"{name} ({where})" for name, where in found if name not in known]
    assert not unknown, "settings classes missing from deploy/configuration.py's COMPONENTS: " + \
        ", ".join(unknown)


def test_every_variable_read_from_the_environment_is_documented() -> None:
    documented = _documented()
    reads = _all_reads()
    assert "SAGA_STATE_DIR" in reads, "the scan found nothing: has it lost its way?"
    undocumented = [f"{name} ({', '.join(places)})" for name, places in sorted(reads.items())
                    if not any(_matches(name, d) for d in documented)]
    assert not undocumented, ("read from the environment, documented nowhere (add a row to a "
                              "table in deploy/configuration.py):\n" + "\n".join(undocumented))


def test_every_documented_variable_is_read_where_the_docs_say() -> None:
    wrong = []
    for component in configuration.COMPONENTS:
        for table in component.tables:
            if table.settings is not None:
                continue
            reads = {name for path in table.read_in
                     for name, _ in environment_reads(ast.parse((ROOT / path).read_text()))}
            wrong += [f"{variable.name} (not read in {', '.join(table.read_in)})"
                      for variable in table.environment
                      if not any(_matches(read, variable.name) for read in reads)]
    assert not wrong, "deploy/configuration.py's tables name variables their files do not " \
        "read:\n" + "\n".join(wrong)


def test_a_reservation_outlives_the_payment_step_it_waits_for() -> None:
    """The defaults agree: a reservation (INVENTARIO_RESERVATION_TTL_S) lasts at least pedidos'
    validation and payment steps plus the margin (the payment step may start as late as the
    validation step's end); a TTL that does not is named, and the generator refuses to run
    with it."""
    pedidos, inventario = configuration.PedidosSettings(), configuration.InventarioSettings()
    assert configuration.settings_conflicts(pedidos, inventario) == []
    needed = (pedidos.validation_timeout_s + pedidos.payment_timeout_s
              + configuration.RESERVATION_MARGIN_S)
    assert inventario.reservation_ttl_s >= needed
    short = configuration.InventarioSettings(reservation_ttl_s=needed - 1)
    [conflict] = configuration.settings_conflicts(pedidos, short)
    assert all(name in conflict for name in ("INVENTARIO_RESERVATION_TTL_S",
                                             "PEDIDOS_VALIDATION_TIMEOUT_S",
                                             "PEDIDOS_PAYMENT_TIMEOUT_S"))
    slow = configuration.PedidosSettings(payment_timeout_s=300)
    assert configuration.settings_conflicts(slow, inventario)
    late = configuration.PedidosSettings(validation_timeout_s=90)
    assert configuration.settings_conflicts(late, inventario)
