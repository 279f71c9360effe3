"""A real browser for the console's tests: Debian's Chromium, headless, driven by Selenium
through Debian's chromedriver (both from ``make bootstrap``, deploy/local/programs.txt). The
driver is named by its path, so Selenium never looks for one to download; a missing Chromium
fails the test, naming the packages, rather than skip it.

Screenshots go to ``test-artifacts/console/`` (git-ignored), one PNG per page a test names."""

from __future__ import annotations

import base64
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from saga_harness.config import ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = ROOT / "test-artifacts" / "console"
# How long a page may take to show what a test waits for.
PAGE_TIMEOUT_S = 20


def require_chromium() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if shutil.which(p) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: the console's browser tests need Debian's "
                    "chromium and chromium-driver (make bootstrap installs them: "
                    "deploy/local/programs.txt)", pytrace=False)


@contextmanager
def chromium() -> Iterator[WebDriver]:
    require_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1400,1000", "--no-first-run",
                     "--disable-extensions", "--disable-background-networking"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(PAGE_TIMEOUT_S)
    try:
        yield driver
    finally:
        driver.quit()


def wait(driver: WebDriver) -> WebDriverWait[WebDriver]:
    return WebDriverWait(driver, PAGE_TIMEOUT_S)


def screenshot(driver: WebDriver, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    # The whole page, not only the window: the timeline's table runs below the fold.
    shot = driver.execute_cdp_cmd(
        "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    path.write_bytes(base64.b64decode(shot["data"]))
    return path
