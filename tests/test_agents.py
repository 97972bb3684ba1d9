"""What agents read: llms.txt, llms-full.txt and the Markdown twin of every page in the built site, and
`vllm-errors mcp` driven by the MCP SDK's own client, in process and as a subprocess on stdio as an assistant
runs it. The site is a small fixture history (three releases) built here."""

from __future__ import annotations

import json
from dataclasses import replace
import re
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from vllm_errors import render
from vllm_errors.bundle import DEFAULT_SITE_URL, local_site
from vllm_errors.cli import main
from vllm_errors.mcp_server import MAX_CHARS, MAX_RESULTS, make_server

from fixture_repo import make_repo
from pagefind_index import indexed_pages
from test_history import V1, V2, V3
from test_render import FULL, MANY, kb
from test_reports import report

TOOLS = {"explain_error", "get_error", "search_errors", "release_notes"}


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("mcp")
    repo = make_repo(tmp, {"v0.1.0": V1, "v0.2.0": V2, "v0.3.0": V3})
    site_dir = tmp / "site"
    argv = ["update", "--repo", str(repo), "--source", "git", "--site-dir", str(site_dir), "--docs-dir", str(tmp / "docs"),
            "--cache-dir", str(tmp / "cache"), "--no-progress", "--jobs", "1"]
    assert main(argv) == 0
    return site_dir


def records(site: Path) -> list[dict]:
    return json.loads((site / "api" / "errors.json").read_text())["errors"]


def call(server, tool: str, **arguments) -> str:
    async def go():
        async with Client(server) as client:
            result = await client.call_tool(tool, arguments)
            assert not result.is_error, result
            (content,) = result.content
            return content.text

    return anyio.run(go)


def tokens(text: str) -> int:
    """An upper bound of a tokenizer's count for English and code: a token per word piece or punctuation mark."""
    return len(re.findall(r"\w{1,4}|[^\w\s]", text))


def test_llms_txt_says_what_the_site_is_and_links_only_what_it_has(site):
    text = (site / "llms.txt").read_text()
    assert text.startswith("# vLLM errors\n\n> Every error vLLM") and "## Indexes" in text and "## API" in text and "## Optional" in text
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert links and all(link.startswith(DEFAULT_SITE_URL) for link in links)
    assert all((site / link.removeprefix(DEFAULT_SITE_URL)).is_file() for link in links), [l for l in links if not (site / l.removeprefix(DEFAULT_SITE_URL)).is_file()]


def test_every_page_has_a_markdown_twin_with_what_the_page_says(site):
    pages = sorted(p.stem for p in (site / "errors").glob("*.html"))
    assert pages and pages == sorted(p.stem for p in (site / "errors").glob("*.md"))
    for e in records(site):
        record = json.loads((site / "api" / "errors" / f"{e['id']}.json").read_text())
        twin = (site / "errors" / f"{e['id']}.md").read_text()
        assert twin.startswith(f"# {record['title']}\n") and f"page: {DEFAULT_SITE_URL}errors/{e['id']}.html" in twin
        assert record["annotation"]["meaning"] in twin and "<span" not in twin and "{ #" not in twin
    indexed = indexed_pages(site)  # the twins are files beside the pages, not pages: search does not list them
    assert any(url.startswith("errors/") for url in indexed) and all(url.endswith(".html") for url in indexed)


def test_llms_full_holds_the_errors_with_a_note_or_a_report_most_reported_first():
    reported = replace(MANY, reports=(report("https://github.com/o/r/issues/1"), report("https://github.com/o/r/issues/2")))
    files = render.render_agent_files(kb((FULL, reported)), "https://errors.example/")
    full = files["llms-full.txt"]
    assert full.startswith(f"# {reported.title}") and FULL.title not in full.splitlines()[0]
    assert "## Reported in public issues (2)" in full and "https://github.com/o/r/issues/2" in full
    assert f"[{reported.title}](https://errors.example/errors/{reported.id}.md): reported 2 times" in files["llms.txt"]


def test_the_server_lists_its_four_tools(site):
    async def go():
        async with Client(make_server(local_site(site))) as client:
            return {t.name: t for t in (await client.list_tools()).tools}

    tools = anyio.run(go)
    assert set(tools) == TOOLS and all(t.description for t in tools.values())


def test_explain_error_answers_a_paste_with_meaning_and_page(site):
    server = make_server(local_site(site))
    error = next(e for e in records(site) if "{" in e["template"])
    message = re.sub(r"\{[^}]*\}", "7", error["template"])
    text = call(server, "explain_error", paste=f"Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n{error['exception']}: {message}\n")
    assert error["id"] in text and str(site / "errors" / f"{error['id']}.html") in text
    assert len(text) <= MAX_CHARS and tokens(text) <= 500
    assert call(server, "explain_error", paste="   ") .startswith("Nothing to look up")
    assert call(server, "explain_error", paste="ZeroDivisionError: division by zero").startswith("No vLLM error matches")


def test_get_error_and_search_errors(site):
    server = make_server(local_site(site))
    error = records(site)[0]
    text = call(server, "get_error", id=error["id"])
    assert text.startswith(error["title"]) and f"page: {site / 'errors' / (error['id'] + '.html')}" in text and tokens(text) <= 500
    assert call(server, "get_error", id="0123456789abcdef").startswith("No error with id")
    words = " ".join(re.findall(r"[a-z]{3,}", error["template"].lower())[:4])
    found = call(server, "search_errors", query=words).splitlines()
    assert 1 <= len(found) <= MAX_RESULTS and any(line.startswith(error["id"] + ":") for line in found)
    assert all(tokens(line) <= 500 for line in found)


def test_release_notes_say_what_a_release_changed(site):
    server = make_server(local_site(site))
    notes = json.loads((site / "api" / "releases.json").read_text())["notes"]
    last = notes[-1]
    text = call(server, "release_notes", tag=last["ref"])
    assert text.startswith(f"vLLM {last['ref']}: {last['errors']} errors; since {last['previous']}: {len(last['added'])} added, "
                           f"{len(last['removed'])} removed, {len(last['reworded'])} reworded.")
    assert call(server, "release_notes", tag=last["ref"].removeprefix("v")) == text
    assert call(server, "release_notes", tag="v9.9.9").startswith("No release v9.9.9 here; known: v0.1.0 to v0.3.0")


def test_the_cli_serves_it_on_stdio(site):
    error = records(site)[0]

    async def go():
        params = StdioServerParameters(command=sys.executable, args=["-m", "vllm_errors.cli", "mcp", "--site", str(site)])
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            result = await client.call_tool("get_error", {"id": error["id"]})
            return names, result.content[0].text

    names, text = anyio.run(go)
    assert names == TOOLS and text.startswith(error["title"])
