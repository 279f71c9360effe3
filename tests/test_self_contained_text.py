"""The repository's text leads nowhere outside it: no issue numbers (the tracker is not part of
a clone), no "this machine"/"this VM" (a reader's machine is another one), no text kept beside
the repository, and no section number of the saga standard (its text is not in the
repository): a rule of the standard is cited as its anchor on docs/standard.md, the one page
that maps the standard's sections, and every such anchor exists there."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Nor the texts kept beside the project (the black-box contract, the standard's companion
# on databases): what they say that the project keeps is in its docs.
OUTSIDE = re.compile(r"\bissues? #?\d+|\bthis (?:VM|machine)\b|CONTRACT\.md|database-as-api"
                     r"|shared/spec", re.IGNORECASE)
# "Part II §5.4", "Part I's minimum", "§6.4", "saga-standard.md": the standard's numbering. A
# section sign is fine where the line names the public document it points into (an RFC, OIDC).
STANDARD_SECTION = re.compile(r"\bPart (?:I|II|III|IV)\b|saga-standard\.md|§\s*\d")
PUBLIC_SPEC = re.compile(r"\bRFC \d{3,5}\b|\bOIDC\b")
STANDARD_ANCHOR = re.compile(r"standard\.md#([\w-]+)")
STANDARD_PAGE = ROOT / "docs" / "standard.md"
# Third-party text kept as it was published (vendored schemas, lock files).
KEPT_AS_PUBLISHED = ("deploy/k8s/schemas/", "uv.lock")


def _tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True)
    names = [n for n in out.stdout.decode().split("\0") if n]
    here = Path(__file__).resolve()  # its own examples below
    return [ROOT / n for n in names
            if not n.startswith(KEPT_AS_PUBLISHED) and (ROOT / n).resolve() != here]


def _lines() -> list[tuple[Path, int, str]]:
    found = []
    for path in _tracked():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue  # binary files (images), and files deleted in the working tree
        found += [(path, number, line) for number, line in enumerate(text.splitlines(), 1)]
    return found


def _where(path: Path, number: int, line: str) -> str:
    return f"{path.relative_to(ROOT)}:{number}: {line.strip()}"


def bare_standard_reference(line: str) -> bool:
    """Whether ``line`` cites the standard by its section numbers."""
    if not STANDARD_SECTION.search(line):
        return False
    without_public = PUBLIC_SPEC.sub("", line)
    return bool(re.search(r"\bPart (?:I|II|III|IV)\b|saga-standard\.md", without_public)
                or (re.search(r"§\s*\d", line) and not PUBLIC_SPEC.search(line)))


def _standard_anchors() -> set[str]:
    """The anchors of docs/standard.md, as test_doc_links makes them (GitHub's rules)."""
    spec = importlib.util.spec_from_file_location("doc_links", ROOT / "tests" / "test_doc_links.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    anchors: set[str] = module.anchors(STANDARD_PAGE.read_text())
    return anchors


def test_no_reference_leads_outside_the_repository() -> None:
    found = [_where(*hit) for hit in _lines() if OUTSIDE.search(hit[2])]
    assert not found, "\n".join(found)


def test_the_standard_is_cited_by_its_page_not_by_its_section_numbers() -> None:
    found = [_where(*hit) for hit in _lines()
             if hit[0] != STANDARD_PAGE and bare_standard_reference(hit[2])]
    assert not found, "cite docs/standard.md#<anchor> instead:\n" + "\n".join(found)


def test_every_anchor_cited_on_the_standards_page_exists() -> None:
    anchors = _standard_anchors()
    found = [f"{_where(*hit)} (#{anchor})" for hit in _lines()
             for anchor in STANDARD_ANCHOR.findall(hit[2]) if anchor not in anchors]
    assert not found, "no such heading on docs/standard.md:\n" + "\n".join(found)


def test_the_check_finds_what_it_looks_for() -> None:
    assert OUTSIDE.search("a regression (issue 6): fixed")
    assert OUTSIDE.search("on this VM an idle vCPU halts")
    assert not OUTSIDE.search("a tissue 6 cm wide, the machine's own clock")
    assert bare_standard_reference("# Relay (Part I §4.3: 100-500 ms)")
    assert bare_standard_reference("below Part I's 30 s minimum")
    assert bare_standard_reference("the registry (§6.4)")
    assert bare_standard_reference("the order saga of `saga-standard.md`")
    assert not bare_standard_reference("RFC 6749 §4.1.2.1: no error is sent there")
    assert not bare_standard_reference("OIDC Discovery §4.3: the issuer it was fetched for")
    assert not bare_standard_reference("the relay (docs/standard.md#relay): 100-500 ms")
    assert not bare_standard_reference("  - name: saga-standard")  # an alert group's name
    assert STANDARD_ANCHOR.findall("see docs/standard.md#saga-and-span-ids.") == [
        "saga-and-span-ids"]
    assert {"relay", "saga-and-span-ids"} <= _standard_anchors()
