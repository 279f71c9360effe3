"""The README's "Try it", read from the README itself, so that a test runs the requests a
reader copies (the compose stack's test sends them)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from saga_harness.config import ROOT


def try_it_bodies(readme: Path = ROOT / "README.md") -> list[dict[str, Any]]:
    """The JSON bodies of the README's "Try it", in order: the two token requests, the
    product's stock and price, the order."""
    text = readme.read_text()
    assert "## Try it" in text, f"{readme} has no section 'Try it'"
    block = text.split("## Try it", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    bodies = [json.loads(body) for body in re.findall(r"-d '(\{.*?\})'", block, re.S)]
    assert len(bodies) == 4, bodies
    return bodies
