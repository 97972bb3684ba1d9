"""The built site in a real browser: a fixture release built through the CLI, served, and driven by headless Chromium.

Needs Debian's chromium at /usr/bin/chromium and the `playwright` package (never its own browser
download). Screenshots go to $VLLM_ERRORS_SCREENSHOTS, or a temporary directory.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from vllm_errors.cli import main
from vllm_errors.pipeline import ScanRequest, scan_release
from fixture_repo import make_repo

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.is_file():
    pytest.skip(f"no Chromium at {CHROMIUM}: apt-get install chromium (as .ci/run does)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed: pip install -e '.[test]'")
Draft202012Validator = pytest.importorskip("jsonschema").Draft202012Validator

pytestmark = pytest.mark.browser

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]

# Each piece must reach the reader as text: not run, not turned into markup, not eaten by Markdown or Jinja.
HOSTILE_PARTS = [
    "<script>alert(1)</script>",
    "`--unsafe-flag`",
    "a|b",
    "{{ x }}",
    "[x](javascript:alert(1))",
    "# heading",
    "<img src=x onerror=alert(1)>",
]
HOSTILE = " ".join(HOSTILE_PARTS[:5]) + "\n" + HOSTILE_PARTS[5] + "\n" + HOSTILE_PARTS[6]

RELEASE = {
    "vllm/__init__.py": "",
    "vllm/config/cache.py": (
        "class CacheConfig:\n"
        "    def __init__(self, block_size, gpu_memory_utilization):\n"
        "        self.block_size = block_size\n"
        "        if gpu_memory_utilization > 1.0:\n"
        "            raise ValueError(\n"
        "                f'GPU memory utilization must be less than 1.0. Got {gpu_memory_utilization}.'\n"
        "            )\n"
        "        if block_size not in (8, 16, 32):\n"
        "            raise ValueError(f'Unsupported block size: {block_size}. Choose 8, 16 or 32.')\n"
    ),
    "vllm/distributed/kv_transfer/connector.py": (
        "def init_engine(config, use_mla):\n"
        "    serde = config.remote_serde\n"
        "    if use_mla and (serde != 'naive' and serde is not None):\n"
        "        raise ValueError('MLA only works with naive serde mode..')\n"
        "    return serde\n"
    ),
    "vllm/v1/engine/core.py": (
        "def step(scheduler_output):\n"
        "    assert scheduler_output is not None, 'scheduler output must not be None'\n"
        "    return scheduler_output\n"
    ),
    "vllm/v1/engine/core_client.py": (
        "def start(procs):\n"
        "    if procs:\n"
        "        raise RuntimeError(f'Engine core initialization failed. See root cause above. Failed core proc(s): {procs}')\n"
    ),
    "vllm/entrypoints/cli.py": (
        "def parse(arg):\n"
        "    if arg.startswith('--'):\n"
        f"        raise RuntimeError({HOSTILE!r})\n"
        "    return arg\n"
    ),
}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("browser")
    repo = make_repo(tmp, {"v1": RELEASE})
    site_dir = tmp / "site"
    # A public report of the block size error, its paste followed by the engine's "See root cause above"
    catalog, _ = scan_release(ScanRequest(repo=str(repo), ref="v1", cache_dir=tmp / "cache", progress=False))
    ids = {e.template.split(" ")[0]: e.id for e in catalog.errors if e.template}
    (tmp / "annotations" / "reports").mkdir(parents=True)
    (tmp / "annotations" / "reports" / f"{ids['Unsupported']}.yaml").write_text(
        "error: block size\nreports:\n- url: https://github.com/vllm-project/vllm/issues/1\n  title: Engine fails to start\n"
        f"  opened: 2026-01-02\n  wrapped_by: [{ids['Engine']}]\n  checked: v1 vllm/config/cache.py:9\n")
    argv = ["build", "--repo", str(repo), "--ref", "v1", "--site-dir", str(site_dir), "--docs-dir", str(tmp / "docs"), "--cache-dir", str(tmp / "cache"),
            "--annotations", str(tmp / "annotations"), "--no-progress"]
    assert main(argv) == 0
    return site_dir


@pytest.fixture(scope="module")
def index(site) -> list[dict]:
    return json.loads((site / "api" / "errors.json").read_text())["errors"]


@pytest.fixture(scope="module")
def hostile(index) -> dict:
    (entry,) = [e for e in index if "<script>" in (e["template"] or "")]
    return entry


@pytest.fixture(scope="module")
def base_url(site):
    from vllm_errors.serve import make_server

    server = make_server(site, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    env = os.environ.get("VLLM_ERRORS_SCREENSHOTS")
    path = Path(env) if env else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Visit:
    """One page loaded in a fresh browser page, with everything the browser complained about."""

    def __init__(self, browser, base_url: str, path: str) -> None:
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.on("console", lambda m: self.errors.append(f"console: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"pageerror: {e}"))
        self.page.on("dialog", self._dialog)
        # Only the served site is reachable: anything else (web fonts, say) is answered empty, so the
        # outcome does not depend on the network, and requests to other hosts are recorded.
        self.elsewhere: list[str] = []
        self.page.route(lambda url: urlsplit(url).netloc != urlsplit(base_url).netloc, self._elsewhere)
        response = self.page.goto(f"{base_url}/{path}", wait_until="networkidle")
        assert response is not None and response.ok, f"{path}: {response and response.status}"
        self.page.wait_for_timeout(200)  # an injected onerror would fire after its image failed

    def _dialog(self, dialog) -> None:
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def _elsewhere(self, route) -> None:
        self.elsewhere.append(route.request.url)
        route.fulfill(status=200, body="")

    def screenshot(self, shots: Path, name: str) -> None:
        self.page.screenshot(path=str(shots / f"{name}.png"), full_page=True)

    def text(self, selector: str = "body") -> str:
        return " ".join(self.page.inner_text(selector).split())

    def heading(self) -> str:
        """The page's h1 as read, without its permalink sign."""
        return " ".join(self.page.inner_text("article h1").removesuffix("¶").split())


PAGES = [("home", ""), ("subsystems", "subsystems/index.html"), ("types", "types/index.html")]


@pytest.mark.parametrize(("name", "path"), PAGES, ids=[p[0] for p in PAGES])
def test_index_pages_load_without_errors(browser, base_url, shots, name, path):
    visit = Visit(browser, base_url, path)
    visit.screenshot(shots, name)
    assert visit.errors == [] and visit.dialogs == []
    assert visit.text("h1")  # something was rendered, not a blank theme shell
    if name == "home":
        assert visit.page.locator("#lookup").count() == 1


def test_an_error_page_loads_without_errors(browser, base_url, shots, index):
    (entry,) = [e for e in index if e["template"] == "MLA only works with naive serde mode.."]
    visit = Visit(browser, base_url, entry["url"])
    visit.screenshot(shots, "error")
    assert visit.errors == [] and visit.dialogs == []
    assert visit.heading() == entry["title"] == "ValueError: MLA only works with naive serde mode.."
    assert visit.page.title().startswith(entry["title"])
    text = visit.text()
    assert "vllm/distributed/kv_transfer/connector.py" in text


def test_a_hostile_message_is_shown_as_text_and_never_run(browser, base_url, shots, hostile):
    visit = Visit(browser, base_url, hostile["url"])
    visit.screenshot(shots, "hostile")
    assert visit.dialogs == []
    assert visit.errors == []
    title = " ".join(hostile["title"].split())
    assert visit.heading() == title  # not markup, and no Markdown escapes left showing
    assert " ".join(visit.page.title().split()).startswith(title)
    text = visit.text()
    missing = [part for part in HOSTILE_PARTS if part not in text]
    assert missing == [], f"not shown literally: {missing}"
    page = visit.page
    assert page.locator('a[href^="javascript:" i]').count() == 0
    assert page.locator("article img[onerror], article [onerror]").count() == 0
    assert page.locator("article script").count() == 0
    assert page.evaluate("() => [...document.querySelectorAll('script')].filter(s => s.textContent.includes('alert(1)')).length") == 0


def _get(url: str) -> tuple[str, bytes]:
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.headers.get("Content-Type", ""), response.read()


def test_the_api_is_served_as_json_with_and_without_extension(base_url, hostile):
    bare_type, bare = _get(f"{base_url}/api/errors/{hostile['id']}")
    json_type, with_ext = _get(f"{base_url}/api/errors/{hostile['id']}.json")
    assert bare_type.split(";")[0].strip() == "application/json"
    assert json_type.split(";")[0].strip() == "application/json"
    assert bare == with_ext
    record = json.loads(bare)
    assert record["id"] == hostile["id"] and record["template"] == hostile["template"]


def test_every_api_record_is_valid_against_the_published_schema(site, index):
    schema = json.loads((site / "api" / "schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    files = sorted((site / "api" / "errors").glob("*.json"))
    assert {f.stem for f in files} == {e["id"] for e in index}
    for path in files:
        record = json.loads(path.read_text())
        problems = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(record)]
        assert problems == [], f"{path.name}: {problems}"
        assert (site / "errors" / f"{record['id']}.html").is_file()
    # The schema is not vacuous: it catches a missing field and a field it does not know.
    record = json.loads(files[0].read_text())
    assert not validator.is_valid({k: v for k, v in record.items() if k != "id"})
    assert not validator.is_valid({**record, "unexpected": 1})


# --- the lookup box on the home page (site/assets/lookup.js) ----------------------------------------

LOOKUP_BUDGET_MS = 200  # from the input event to the result in the page, the index already loaded

# Sets the box's text and fires the input event a paste or a keystroke fires; resolves with the
# milliseconds until the box has shown its answer and the page has laid it out.
TIMED_INPUT = """([text, inputType]) => new Promise((resolve) => {
    const root = document.getElementById("lookup");
    const box = root.querySelector("textarea");
    let start = 0;
    root.addEventListener("lookup:shown", () => {
        root.getBoundingClientRect();
        resolve(performance.now() - start);
    }, {once: true});
    start = performance.now();
    box.value = text;
    box.dispatchEvent(new InputEvent("input", {bubbles: true, inputType}));
})"""


def _lookup_ready(visit: Visit):
    box = visit.page.locator("#lookup textarea")
    box.focus()  # the index is fetched on first focus
    visit.page.wait_for_selector("#lookup[data-state=ready]", timeout=5000)
    return box


def test_the_lookup_box_finds_a_pasted_error_fast(browser, base_url, shots, index):
    (entry,) = [e for e in index if (e["template"] or "").startswith("Unsupported block size")]
    visit = Visit(browser, base_url, "")
    page = visit.page
    box = _lookup_ready(visit)
    assert box.get_attribute("placeholder") == "Paste the error or the whole traceback"
    paste = (
        "(EngineCore_DP0 pid=37512) ERROR 05-06 01:55:26 [core.py:383] Traceback (most recent call last):\n"
        f'(EngineCore_DP0 pid=37512) ERROR 05-06 01:55:26 [core.py:383]   File "/usr/lib/python3/site-packages/vllm/config/cache.py", line {entry["line"]}, in __init__\n'
        "(EngineCore_DP0 pid=37512) ERROR 05-06 01:55:26 [core.py:383] ValueError: Unsupported block size: 12. Choose 8, 16 or 32."
    )
    typed_ms = page.evaluate(TIMED_INPUT, [paste, "insertText"])  # typing: debounced
    pasted_ms = page.evaluate(TIMED_INPUT, [paste + "\n", "insertFromPaste"])  # a paste: answered at once
    print(f"lookup box: {pasted_ms:.1f} ms from a paste, {typed_ms:.1f} ms from a keystroke (debounced) to the result")
    assert typed_ms < LOOKUP_BUDGET_MS and pasted_ms < LOOKUP_BUDGET_MS

    first = page.locator("#lookup .ve-lookup__match").first
    link = first.locator("a")
    assert " ".join(link.inner_text().split()) == entry["title"]
    assert link.evaluate("a => a.href") == f"{base_url}/{entry['url']}"
    assert "high confidence" in first.inner_text() and "block_size = 12" in first.inner_text()
    visit.screenshot(shots, "lookup")
    link.click()
    page.wait_for_load_state()
    assert visit.heading() == entry["title"]
    assert visit.errors == [] and visit.dialogs == []


def test_the_lookup_box_names_the_root_causes_reported_behind_a_wrapper_pasted_alone(browser, base_url, shots, index):
    (cause,) = [e for e in index if (e["template"] or "").startswith("Unsupported block size")]
    assert cause["reports"] == 1
    visit = Visit(browser, base_url, "")
    box = _lookup_ready(visit)
    box.fill("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
    visit.page.wait_for_selector("#lookup .ve-lookup__status")
    results = visit.text("#lookup .ve-lookup__results")
    assert "This error only points at another one" in results and "The errors reported most often behind it" in results
    link = visit.page.locator("#lookup .ve-lookup__list").nth(1).locator("a").first
    assert link.evaluate("a => a.href") == f"{base_url}/{cause['url']}"
    visit.screenshot(shots, "lookup-wrapper")
    link.click()
    visit.page.wait_for_load_state()
    assert "Reported 1 time in public issues" in visit.text()
    assert visit.errors == [] and visit.dialogs == []


def test_the_lookup_box_answers_typing_and_says_when_nothing_matches(browser, base_url, shots):
    visit = Visit(browser, base_url, "")
    box = _lookup_ready(visit)
    box.press_sequentially("ZeroDivisionError: division by zero")
    visit.page.wait_for_selector("#lookup .ve-lookup__status")
    assert visit.text("#lookup .ve-lookup__results").startswith("No vLLM error matches this paste")
    box.fill("")
    visit.page.wait_for_function("() => document.querySelector('#lookup .ve-lookup__results').childElementCount === 0")
    box.fill("ValueError: GPU memory utilization must be below 1.0; it is 1.3")
    visit.page.wait_for_selector("#lookup .ve-lookup__status")
    results = visit.text("#lookup .ve-lookup__results")
    assert "Closest candidates:" in results and "GPU memory utilization must be less than 1.0" in results
    visit.screenshot(shots, "lookup-no-match")
    assert visit.errors == [] and visit.dialogs == []


def test_the_lookup_box_shows_a_hostile_paste_and_title_as_text(browser, base_url, shots, hostile):
    visit = Visit(browser, base_url, "")
    box = _lookup_ready(visit)
    box.fill("Traceback (most recent call last):\nKeyError: '<img src=x onerror=alert(2)>'\n\nDuring handling of the above exception, another exception occurred:\n\n"
             "RuntimeError: " + HOSTILE)
    visit.page.wait_for_selector("#lookup .ve-lookup__match a")
    visit.page.wait_for_timeout(200)  # an injected onerror would fire after its image failed
    results = visit.text("#lookup .ve-lookup__results")
    assert " ".join(hostile["title"].split()) in results
    assert visit.page.locator("#lookup img, #lookup script, #lookup [onerror]").count() == 0
    visit.screenshot(shots, "lookup-hostile")
    assert visit.dialogs == [] and visit.errors == []


def search_in_header(page, query: str, timeout: float = 10_000) -> list[str]:
    """Type a query into the header's search box; the titles of the results it shows."""
    box = page.locator(".ve-search input")
    box.fill(query)
    page.wait_for_function("q => document.querySelector('.ve-search')?.dataset.query === q", arg=query, timeout=timeout)
    return [" ".join(t.split()) for t in page.locator(".ve-search__results li").all_inner_texts()]


def test_the_header_search_finds_pages_and_fetches_only_what_a_query_needs(browser, base_url, shots, index):
    (entry,) = [e for e in index if e["template"] == "MLA only works with naive serde mode.."]
    visit = Visit(browser, base_url, "subsystems/index.html")
    page = visit.page
    fetched: list[tuple[str, int]] = []  # what the search fetched, the worker's requests included
    page.on("requestfinished", lambda r: fetched.append((r.url, r.sizes()["responseBodySize"])) if "/pagefind/" in r.url else None)
    page.wait_for_timeout(300)
    assert fetched == []  # nothing of the search loads with the page
    found = search_in_header(page, "naive serde")
    assert found and found[0].startswith(entry["title"])
    kinds = {urlsplit(url).path.rsplit(".", 1)[-1] for url, _ in fetched}
    assert {"js", "json", "pagefind", "pf_meta", "pf_index", "pf_fragment"} <= kinds, fetched  # code, wasm, index chunk, excerpts
    print(f"header search: first query fetched {len(fetched)} files, {sum(size for _, size in fetched)} bytes")
    assert search_in_header(page, "zzzqqqxxv") == [
        "No page matches. To find the error behind a message or a traceback, paste it into the lookup box on the home page."]
    visit.screenshot(shots, "search")
    page.locator(".ve-search input").fill("naive serde")
    page.wait_for_function("() => document.querySelector('.ve-search')?.dataset.query === 'naive serde'")
    page.locator(".ve-search__results a").first.click()
    page.wait_for_load_state()
    assert visit.heading() == entry["title"] and visit.errors == [] and visit.dialogs == [] and visit.elsewhere == []


def test_the_header_search_shows_a_hostile_title_as_text(browser, base_url, hostile):
    visit = Visit(browser, base_url, "")
    found = search_in_header(visit.page, "unsafe flag")
    assert any("<script>alert(1)</script>" in title for title in found)
    assert visit.page.locator(".ve-search__results script, .ve-search__results img").count() == 0
    assert visit.errors == [] and visit.dialogs == []
