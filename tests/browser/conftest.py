"""Browser tests: Playwright (Python) driving Debian's Chromium against pytest-django's live
server. Skipped, with the reason, when /usr/bin/chromium is not installed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from django.test import Client

# Playwright's sync API runs an event loop in this thread; Django refuses synchronous database
# access from a thread with a running loop unless told it is safe (here it is: one thread).
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parent / "screenshots"
WIDTHS = {"desktop": (1280, 900), "phone": (390, 844)}
# Playwright's 5 s default fails on a loaded 2-core machine (a live server, Chromium and the
# suite share it): actions and expect() wait up to this long; a passing test does not wait it.
TIMEOUT_MS = 30_000
SKIP_REASON = (
    "browser tests need Debian's Chromium at /usr/bin/chromium "
    "(apt-get install -y chromium) and the playwright package"
)


def _available() -> bool:
    if not CHROMIUM.exists():
        return False
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return True


def pytest_collection_modifyitems(config, items):
    if _available():
        return
    here = Path(__file__).resolve().parent
    for item in items:
        if here in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.skip(reason=SKIP_REASON))


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
        )
        yield chromium
        chromium.close()


class BrowserPage:
    """A page plus what the test needs around it: the live server's URL and every console
    error (a CSP violation shows up there)."""

    def __init__(self, page, base_url: str):
        self.page = page
        self.base_url = base_url
        self.errors: list[str] = []
        page.on(
            "console",
            lambda message: self.errors.append(message.text) if message.type == "error" else None,
        )
        page.on("pageerror", lambda error: self.errors.append(str(error)))
        page.on("dialog", lambda dialog: dialog.accept())

    def goto(self, path: str):
        return self.page.goto(self.base_url + path)

    def screenshot(self, name: str, *, full_page: bool = True) -> None:
        SCREENSHOTS.mkdir(exist_ok=True)
        self.page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=full_page)


@pytest.fixture
def open_page(browser, live_server):
    """open_page(user=None, width="desktop", javascript=True, touch=False, dark=False,
    trust=None) -> BrowserPage; a user is logged in by cookie; `touch`: a touch screen, as a
    phone's (taps, no hover); `dark`: the system asks for a dark theme (prefers-color-scheme);
    `trust`: an https origin with a test certificate (the test OpenID provider)."""
    contexts = []

    def open_(
        user=None,
        width: str = "desktop",
        *,
        javascript: bool = True,
        touch: bool = False,
        dark: bool = False,
        trust: str | None = None,
    ) -> BrowserPage:
        w, h = WIDTHS[width]
        context = browser.new_context(
            # `trust`: an https origin whose test certificate the browser accepts (the test
            # OpenID provider's).
            ignore_https_errors=trust is not None,
            viewport={"width": w, "height": h},
            java_script_enabled=javascript,
            has_touch=touch,
            is_mobile=touch,
            color_scheme="dark" if dark else "light",
        )
        context.set_default_timeout(TIMEOUT_MS)
        contexts.append(context)
        if user is not None:
            client = Client()
            client.force_login(user)
            context.add_cookies(
                [
                    {
                        "name": "sessionid",
                        "value": client.cookies["sessionid"].value,
                        "url": live_server.url,
                    }
                ]
            )
        return BrowserPage(context.new_page(), live_server.url)

    yield open_
    for context in contexts:
        context.close()


def axe_violations(page) -> list[tuple[str, str, int]]:
    """axe-core's violations on the page as it is now (rule, help, elements): the package
    bundles axe-core, nothing is fetched."""
    from axe_playwright_python.sync_playwright import Axe

    violations = Axe().run(page).response["violations"]
    return [(v["id"], v["help"], len(v["nodes"])) for v in violations]
