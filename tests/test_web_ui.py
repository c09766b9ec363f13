"""The web UI and the API docs in a real browser: Debian's Chromium, driven by Playwright
(`executable_path`, so Playwright never downloads a browser of its own), against a real
API, indexer worker and embedder with a bearer token configured.

Every page load also checks that nothing was fetched from anywhere but the API itself and
that the page logged no error (a CSP violation or a script error would show there).
Screenshots of each view land in the test's temporary directory.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from semsearch.embedder.cpu import detect
from tests.conftest import Stack

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps dialling Google's hosts, which an
# offline machine refuses; --no-sandbox because CI runs as root.
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-default-apps"]  # fmt: skip
TOKEN = "web-ui-test-token"
DECK = Path(__file__).parent / "documents" / "node_modules" / "lokijs" / "presentations" / "lokijs.pptx"

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    assert Path(CHROMIUM).exists(), "Chromium is missing: `make install` installs Debian's chromium package"
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture(scope="module")
def site(api_factory, tmp_path_factory: pytest.TempPathFactory) -> Stack:  # type: ignore[no-untyped-def]
    stack: Stack = api_factory(token=TOKEN)
    root = tmp_path_factory.mktemp("web") / "harbour"
    root.mkdir()
    (root / "pilots.md").write_text(
        "# Harbour\n\n## Pilots\n\nThe harbour pilot boards incoming ships at the outer buoy\n"
        "and brings them through the channel at high tide.\n"
    )
    (root / "tides.py").write_text('def high_tide(day: int) -> float:\n    """Hours after midnight of high tide."""\n'
                                   "    return (day * 0.84) % 12.4\n")  # fmt: skip
    (root / ".env").write_text("HARBOUR_KEY=not-for-the-index\n")
    (root / "lokijs.pptx").write_bytes(DECK.read_bytes())  # other people's slides: a hit says its slide
    stack.cli("add", str(root))
    stack.index()
    return stack


class Watched:
    """A page plus what it fetched and what it logged."""

    def __init__(self, page: Page, base: str) -> None:
        self.page = page
        self.base = base
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.blocked: list[str] = []  # refused by the page's Content-Security-Policy: never sent
        page.on("request", lambda r: self.requests.append(r.url))
        page.on("requestfailed", lambda r: self.blocked.append(r.url) if r.failure == "csp" else None)
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" and "401" not in m.text else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))

    def assert_clean(self) -> None:
        expect(self.page.locator("#problem")).to_be_hidden()
        assert not foreign_requests(self), f"the page fetched from outside the API: {foreign_requests(self)}"
        assert not self.errors, self.errors


def foreign_requests(watched: Watched) -> list[str]:
    own = (watched.base, f"blob:{watched.base}", "data:")
    return [u for u in watched.requests if not u.startswith(own) and u not in watched.blocked]


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    ctx = browser.new_context(viewport={"width": 1200, "height": 900})
    yield ctx
    ctx.close()


def open_ui(context: BrowserContext, site: Stack, hash_: str = "") -> Watched:
    """Opens the UI and answers its token prompt, as a person would the first time."""
    watched = Watched(context.new_page(), site.url)
    watched.page.goto(f"{site.url}/{hash_}")
    dialog = watched.page.locator("#token-dialog")
    expect(dialog).to_be_visible()
    watched.page.fill("#token-input", TOKEN)
    watched.page.press("#token-input", "Enter")
    expect(dialog).to_be_hidden()
    return watched


def test_search_renders_hits_from_a_real_index(context: BrowserContext, site: Stack, tmp_path: Path) -> None:
    ui = open_ui(context, site)
    page = ui.page
    page.fill("#q", "who guides ships into the harbour")
    page.press("#q", "Enter")
    first = page.locator(".hit").first
    expect(first.locator(".hit-file")).to_have_text("harbour/pilots.md")
    expect(first.locator(".label")).to_contain_text("0.")  # the why-label with its cosine
    expect(first.locator(".crumbs")).to_have_text("Harbour › Pilots")
    expect(first.locator(".where")).to_have_text("lines 3–6")
    marked = {m.lower() for m in first.locator("mark").all_inner_texts()}
    assert {"harbour", "ships"} <= marked and "them" not in marked  # whole words only
    page.screenshot(path=str(tmp_path / "search.png"), full_page=True)

    first.locator(".hit-file").click()  # the chunk with its surrounding lines (the confined file read)
    viewer = page.locator("#viewer")
    expect(viewer).to_be_visible()
    expect(page.locator("#viewer-title")).to_contain_text("harbour/pilots.md")
    assert page.locator("#viewer .line.in-chunk").count() >= 2
    expect(page.locator('#viewer .line[data-line="1"]')).to_contain_text("# Harbour")
    page.screenshot(path=str(tmp_path / "chunk.png"))
    page.keyboard.press("Escape")
    expect(viewer).to_be_hidden()
    ui.assert_clean()


def test_a_slide_hit_says_its_slide_and_opens_on_its_text(context: BrowserContext, site: Stack) -> None:
    ui = open_ui(context, site)
    page = ui.page
    # A line of slide 3 half remembered: the slide that holds it comes first, labelled as a quote.
    page.fill("#q", "a javascript database whose data is plain objects persisted on disk as JSON")
    page.press("#q", "Enter")
    first = page.locator(".hit").first
    expect(first.locator(".hit-file")).to_have_text("harbour/lokijs.pptx")
    expect(first.locator(".where")).to_contain_text("slide 3, lines")
    expect(first.locator(".label-quote")).to_contain_text("[quote ")
    first.locator(".hit-file").click()
    expect(page.locator("#viewer .line.in-chunk").first).to_contain_text("# Slide 3")  # the slide's text, not XML
    ui.assert_clean()


def test_filters_narrow_the_search(context: BrowserContext, site: Stack) -> None:
    ui = open_ui(context, site)
    page = ui.page
    page.click("#filters summary")
    page.fill("#f-ext", "py")
    page.fill("#q", "harbour pilot tide")
    page.press("#q", "Enter")
    expect(page.locator(".hit").first.locator(".hit-file")).to_have_text("harbour/tides.py")
    assert set(page.locator(".hit-file").all_inner_texts()) == {"harbour/tides.py"}
    expect(page.locator("#f-folder option")).to_have_text(["all folders", "harbour"])
    ui.assert_clean()


def test_explain_says_why_a_file_is_not_found(context: BrowserContext, site: Stack, tmp_path: Path) -> None:
    ui = open_ui(context, site, "#explain")
    page = ui.page
    path = next(p for p in _folder_paths(site) if p.endswith("harbour"))
    page.fill("#explain-path", f"{path}/.env")
    page.press("#explain-path", "Enter")
    expect(page.locator("#explained .verdict")).to_have_text("Not indexed.")
    expect(page.locator("#explained")).to_contain_text("secret")
    page.screenshot(path=str(tmp_path / "explain.png"))
    page.fill("#explain-path", f"{path}/pilots.md")
    page.press("#explain-path", "Enter")
    expect(page.locator("#explained .verdict")).to_have_text("Indexed, and in the index.")
    ui.assert_clean()


def test_a_requested_run_shows_progress_and_finishes(context: BrowserContext, site: Stack, tmp_path: Path) -> None:
    path = next(p for p in _folder_paths(site) if p.endswith("harbour"))
    (Path(path) / "moorings.md").write_text("# Moorings\n\nVisiting yachts tie up at the east pontoon.\n")
    ui = open_ui(context, site, "#status")
    page = ui.page
    expect(page.locator("#facts")).to_contain_text("all-MiniLM-L6-v2")
    expect(page.locator("#facts")).to_contain_text(detect().name)  # the embedder's CPU, with its extensions
    # A small index is answered from memory once its copy has loaded (before it: LanceDB answers).
    held = re.compile(r"In memory\s*(\d[\d,]* chunks, [\d.]+ [KMG]?B|no \(LanceDB answers\))")
    expect(page.locator("#facts")).to_contain_text(held)
    expect(page.locator("#folders tbody th")).to_have_text(["harbour"])
    page.get_by_role("button", name="Index harbour").click()
    run = page.locator("#run")
    expect(run).to_be_visible()
    expect(run).to_have_attribute("data-state", "done", timeout=60_000)
    expect(page.locator("#run-state")).to_contain_text("done · folder harbour")
    expect(page.locator("#run-summary")).to_contain_text("Files indexed")
    assert page.locator("#run-progress").evaluate("p => p.value === p.max")
    expect(page.locator("#folders tbody td.num").first).to_have_text("4")  # pilots, tides, the deck, moorings
    page.screenshot(path=str(tmp_path / "status.png"), full_page=True)
    ui.assert_clean()


def test_a_wrong_token_is_refused(context: BrowserContext, site: Stack) -> None:
    page = context.new_page()
    page.goto(site.url)
    page.fill("#token-input", "not-the-token")
    page.press("#token-input", "Enter")
    expect(page.locator("#token-reason")).to_have_text(
        "That token was refused. Enter the API's token (SEMSEARCH_TOKEN).")  # fmt: skip
    page.click("#token-cancel")
    expect(page.locator("#problem-text")).to_contain_text("missing or wrong bearer token")
    assert page.evaluate("sessionStorage.getItem('semsearch.token')") is None


def test_keyboard_phone_width_and_dark_mode(browser: Browser, site: Stack, tmp_path: Path) -> None:
    ctx = browser.new_context(viewport={"width": 390, "height": 844}, color_scheme="dark", is_mobile=True)
    try:
        ui = open_ui(ctx, site)
        page = ui.page
        page.keyboard.press("Tab")  # from the search box to its button
        assert page.evaluate("document.activeElement.id") != "q"
        page.keyboard.press("/")
        assert page.evaluate("document.activeElement.id") == "q"
        page.keyboard.type("when is high tide")
        page.keyboard.press("Enter")
        expect(page.locator(".hit").first).to_be_visible()
        assert page.evaluate("document.scrollingElement.scrollWidth <= window.innerWidth"), "sideways scrolling"
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        assert sum(int(c) for c in background[4:-1].split(",")[:3]) < 150, background  # dark
        page.screenshot(path=str(tmp_path / "phone-dark.png"), full_page=True)
        ui.assert_clean()
    finally:
        ctx.close()


def test_api_docs_render_offline(context: BrowserContext, site: Stack) -> None:
    """/docs and /redoc with their own assets: they list the operations with no network.
    (ReDoc's bundle hard-codes a logo on its CDN; the page's policy refuses to fetch it.)"""
    page = context.new_page()
    watched = Watched(page, site.url)
    page.goto(f"{site.url}/docs")
    expect(page.locator(".opblock-summary-path").filter(has_text="/v1/search")).to_be_visible()
    page.goto(f"{site.url}/redoc")
    expect(page.get_by_text("/v1/search").first).to_be_attached()
    assert not foreign_requests(watched), foreign_requests(watched)


def _folder_paths(site: Stack) -> list[str]:
    with site.http() as http:
        return [f["path"] for f in http.get("/v1/folders").json()]
