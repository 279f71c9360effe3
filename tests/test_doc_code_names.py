"""The reading path stays true: every module, symbol and repository path the guides name in
`code` (`pedidos.usecases.place_order.place_order`, `sagakit.store.unit_of_work.UnitOfWork.claim`,
`services/pedidos/src/pedidos/app.py`) exists, so a file or a function that moves or goes away
fails here until the page that names it follows. Links are checked by test_doc_links."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GUIDES = [ROOT / "docs" / name for name in ("architecture.md", "standard.md", "contributing.md")]
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
INLINE_CODE = re.compile(r"`([^`\n]+)`")
DOTTED = re.compile(r"[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
TOP_DIRS = ("services/", "libs/", "tools/", "deploy/", "tests/", "docs/")
REPO_PATH = re.compile(r"[\w.\-/]+")


@cache
def packages() -> dict[str, Path]:
    """Every importable package of the workspace, by name: each part's ``src/<package>``."""
    found = {}
    for init in [*ROOT.glob("*/*/src/*/__init__.py"), *ROOT.glob("*/src/*/__init__.py")]:
        found[init.parent.name] = init.parent
    return found


def _defined(body: list[ast.stmt]) -> set[str]:
    """The names a module or class body binds: definitions, assignments and imports."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try)):
            names |= _defined(node.body)
    return names


def _class_body(body: list[ast.stmt], name: str) -> list[ast.stmt] | None:
    for node in body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node.body
    return None


def resolves(dotted: str) -> bool | None:
    """True when ``dotted`` names a module of the workspace, or a name bound in one (a class's
    member included); None when it does not start with a workspace package (not a name of ours,
    not checked)."""
    first, *rest = dotted.split(".")
    path = packages().get(first)
    if path is None:
        return None
    while rest and ((path / rest[0]).is_dir() or (path / f"{rest[0]}.py").is_file()):
        path = path / rest[0] if (path / rest[0]).is_dir() else path / f"{rest[0]}.py"
        rest = rest[1:]
    if not rest:
        return True
    source = path / "__init__.py" if path.is_dir() else path
    body: list[ast.stmt] | None = ast.parse(source.read_text()).body
    for i, name in enumerate(rest):
        if body is None or name not in _defined(body):
            return False
        origin = _imported_from(body, name)
        if origin is not None and i + 1 < len(rest):
            # A re-export (``sagakit.runtime.Runtime``): its members are its module's.
            return resolves(".".join([origin, name, *rest[i + 1:]])) is True
        if i + 1 < len(rest):
            body = _class_body(body, name)
    return True


def _imported_from(body: list[ast.stmt], name: str) -> str | None:
    """The module ``name`` is imported from in ``body``, if it is imported."""
    for node in body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if any((a.asname or a.name) == name for a in node.names):
                return node.module
    return None


def missing_names(page: Path) -> list[str]:
    missing = []
    for span in INLINE_CODE.findall(FENCE.sub("", page.read_text())):
        span = span.strip()
        if span.startswith(TOP_DIRS) and REPO_PATH.fullmatch(span):
            if not (ROOT / span.rstrip("/")).exists():
                missing.append(f"{page.name}: `{span}` (no such path)")
        elif DOTTED.fullmatch(span) and resolves(span) is False:
            missing.append(f"{page.name}: `{span}` (no such module or name)")
    return missing


def test_every_name_the_guides_give_resolves() -> None:
    missing = [m for page in GUIDES for m in missing_names(page)]
    assert not missing, "\n".join(missing)


def test_the_check_sees_what_moved(tmp_path: Path) -> None:
    assert resolves("sagakit.store.unit_of_work.UnitOfWork.claim")
    assert resolves("pedidos.usecases.place_order")
    assert resolves("sagakit.runtime.Runtime.uow")  # re-exported, its member followed
    assert resolves("sagakit.runtime.Runtime.gone") is False
    assert resolves("pedidos.usecases.place_order.gone") is False
    assert resolves("sagakit.store.unit_of_work.UnitOfWork.gone") is False
    assert resolves("orders.payment_declined_at") is None  # a column, not a module of ours
    page = tmp_path / "page.md"
    page.write_text("`services/pedidos/src/pedidos/app.py` `services/pedidos/src/gone.py`\n"
                    "`pedidos.app.create` `pedidos.app.gone` `x-topic`\n"
                    "```\n`pedidos.not_checked_in_a_fence`\n```\n")
    assert missing_names(page) == ["page.md: `services/pedidos/src/gone.py` (no such path)",
                                   "page.md: `pedidos.app.gone` (no such module or name)"]
