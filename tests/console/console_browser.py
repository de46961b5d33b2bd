"""A real headless browser for the console tests: Debian's chromium driven by Selenium
through Debian's chromedriver (never a browser downloaded at test time).

Every page load is checked for browser console errors (JavaScript exceptions, failed
resources); screenshots go to ``build/console-screenshots/`` (gitignored).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "build" / "console-screenshots"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def require_browser() -> None:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.skip("Debian's chromium and chromium-driver are not installed (see .ci/run)")


class Browser:
    """One chromium session; ``open`` loads a page and fails on console errors."""

    def __init__(
        self,
        base_url: str,
        width: int = 1366,
        height: int = 900,
        *,
        accept_insecure_certs: bool = False,
    ) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        self.base_url = base_url.rstrip("/")
        self.profile = tempfile.mkdtemp(prefix="console-chromium-")
        options = webdriver.ChromeOptions()
        options.binary_location = CHROMIUM
        for flag in [*FLAGS, f"--user-data-dir={self.profile}", f"--window-size={width},{height}"]:
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
        # A secured cluster's console serves HTTPS with a certificate from the test's own CA.
        options.accept_insecure_certs = accept_insecure_certs
        self.driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
        self.driver.set_page_load_timeout(30)
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def close(self) -> None:
        self.driver.quit()
        shutil.rmtree(self.profile, ignore_errors=True)

    def console_errors(self) -> list[str]:
        return [
            entry["message"]
            for entry in self.driver.get_log("browser")
            if entry.get("level") in ("SEVERE", "ERROR")
        ]

    def open(self, path: str, *, expect_errors: bool = False) -> None:
        self.driver.get(self.base_url + path)
        self.wait(lambda: self.driver.execute_script("return document.readyState") == "complete")
        if not expect_errors:
            self.assert_no_console_errors()

    def assert_no_console_errors(self) -> None:
        # A form refused with 400 (bad input) or 401 (a wrong password) is the page, not a fault.
        errors = [
            e
            for e in self.console_errors()
            if "status of 400" not in e and "status of 401" not in e
        ]
        assert not errors, f"browser console errors on {self.driver.current_url}: {errors}"

    def wait(self, condition: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
        deadline = time.monotonic() + timeout
        last: Exception | None = None
        while time.monotonic() < deadline:
            try:
                value = condition()
                if value:
                    return value
            except Exception as exc:  # the element is not there yet
                last = exc
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what or condition} ({last})")

    def css(self, selector: str) -> Any:
        from selenium.webdriver.common.by import By

        return self.driver.find_element(By.CSS_SELECTOR, selector)

    def all(self, selector: str) -> list[Any]:
        from selenium.webdriver.common.by import By

        return list(self.driver.find_elements(By.CSS_SELECTOR, selector))

    def submit(self, selector: str) -> None:
        """Click a form's submit button and wait for the page that answers it.

        The old page's readyState is already "complete", so waiting for that alone can
        read the old page (a slow SASL login lost this race in CI); the old document's
        root going stale is what says the answer has replaced it."""
        from selenium.common.exceptions import StaleElementReferenceException

        old_root = self.css("html")
        self.css(selector).click()

        def replaced() -> bool:
            try:
                old_root.is_enabled()
            except StaleElementReferenceException:
                return True
            return False

        self.wait(replaced, what=f"the page answering {selector}")
        self.wait(lambda: self.driver.execute_script("return document.readyState") == "complete")

    def text(self, selector: str) -> str:
        return str(self.css(selector).text)

    def screenshot(self, name: str) -> Path:
        path = SCREENSHOTS / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path

    def type(self, selector: str, text: str, clear: bool = True) -> None:
        element = self.css(selector)
        if clear:
            element.clear()
        element.send_keys(text)

    def select(self, selector: str, value: str) -> None:
        from selenium.webdriver.support.ui import Select

        Select(self.css(selector)).select_by_value(value)

    def keys(self, *keys: str) -> None:
        """Type at whatever has focus (keyboard-only navigation)."""
        from selenium.webdriver.common.action_chains import ActionChains

        ActionChains(self.driver).send_keys(*keys).perform()
