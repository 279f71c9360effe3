"""The console's browser tests fail, naming the packages, when Chromium or its driver is
missing: they never skip, and never let Selenium look for a browser to download."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_stack.system_programs import programs
from saga_harness import browser


@pytest.mark.parametrize("program", ["CHROMIUM", "CHROMEDRIVER"])
def test_a_missing_browser_fails_the_test_naming_the_packages(
        monkeypatch: pytest.MonkeyPatch, program: str) -> None:
    monkeypatch.setattr(browser, program, "/no/such/program")
    with pytest.raises(pytest.fail.Exception, match="chromium and chromium-driver"):
        with browser.chromium():
            pass


def test_make_bootstrap_installs_both_for_the_tests() -> None:
    rows = {p.name: (p.need, p.package) for p in programs()}
    assert rows[Path(browser.CHROMIUM).name] == ("test", "chromium")
    assert rows[Path(browser.CHROMEDRIVER).name] == ("test", "chromium-driver")
