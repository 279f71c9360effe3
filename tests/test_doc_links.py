"""Every relative link of the README and the docs leads somewhere: to a file of the repository
and, when it names an `#anchor`, to a heading of that file (as GitHub makes anchors)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.M | re.S)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)


def _prose(text: str) -> str:
    """The text outside code blocks, where a `#` starts a heading and `[..](..)` is a link."""
    return FENCE.sub("", text)


def anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, markup and punctuation dropped but for
    hyphens and underscores, each space a hyphen."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)   # a link keeps its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every anchor of a page: its headings' (a repeated one numbered -1, -2, ... as GitHub
    does) and the explicit `<a name=...>` ones."""
    seen: Counter[str] = Counter()
    found = set(HTML_ANCHOR.findall(text))
    for heading in HEADING.findall(_prose(text)):
        base = anchor(heading)
        found.add(f"{base}-{seen[base]}" if seen[base] else base)
        seen[base] += 1
    return found


def broken_links(page: Path, root: Path = ROOT) -> list[str]:
    broken = []
    for target in LINK.findall(INLINE_CODE.sub("", _prose(page.read_text()))):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # http:, https:, mailto:: outside the repository by design
        path, _, fragment = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{page.relative_to(root)}: {target} (no such file)")
        elif fragment and file.suffix == ".md" and fragment not in anchors(file.read_text()):
            broken.append(f"{page.relative_to(root)}: {target} (no such heading)")
    return broken


def test_every_relative_link_resolves() -> None:
    broken = [b for page in PAGES for b in broken_links(page)]
    assert not broken, "\n".join(broken)


def test_anchors_follow_githubs_rules() -> None:
    assert anchor("Rehearsing failures: `make chaos`") == "rehearsing-failures-make-chaos"
    assert anchor("The fake payment gateway's tokens") == "the-fake-payment-gateways-tokens"
    assert anchor("Request limits: `413` and `429`") == "request-limits-413-and-429"
    assert anchors("# A\n## A\n```bash\n# not a heading\n```\n") == {"a", "a-1"}


def test_the_check_sees_a_missing_file_and_a_missing_heading(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Here\n[ok](#here) [gone](nowhere.md) [lost](#elsewhere)\n"
                    "`[code](not-a-link.md)`\n```\n[code](neither.md)\n```\n")
    assert [b.split(": ", 1)[1] for b in broken_links(page, tmp_path)] == [
        "nowhere.md (no such file)", "#elsewhere (no such heading)"]

