"""Issue 6 on real releases: history, release notes and lookup across releases. CI builds a mirror with
tags v0.28.0, v0.32.0 and v0.33.0 (`vllm-errors mirror DEST 0.28.0 0.32.0 0.33.0`); set
VLLM_ERRORS_MIRROR to such a mirror to run them locally. Every release tag from v0.28.0 on is covered."""

from __future__ import annotations

import json
import re

import pytest

from vllm_errors import lookup, pipeline
from vllm_errors.cli import main
from test_real_release import ADAPTER, MIRROR, REFERENCE, cache_dir

pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def history_site(tmp_path_factory):
    if not MIRROR:
        pytest.skip("VLLM_ERRORS_MIRROR names no release mirror")
    root = tmp_path_factory.mktemp("history")
    args = ["update", "--repo", MIRROR, "--source", "git", "--since", "v0.28.0", "--site-dir", str(root / "site"),
            "--docs-dir", str(root / "docs"), "--cache-dir", str(cache_dir(tmp_path_factory)), "--no-progress"]
    assert main(args) == 0
    return root


def scan(tmp_path_factory, ref):
    request = pipeline.ScanRequest(repo=MIRROR, ref=ref, cache_dir=cache_dir(tmp_path_factory), progress=False)
    return pipeline.scan_release(request)[0]


def reference(site):
    index = json.loads((site / "api" / "errors.json").read_text())
    (entry,) = [e for e in index["errors"] if e["template"] == REFERENCE]
    return json.loads((site / "api" / "errors" / f"{entry['id']}.json").read_text())


def test_reference_page_lists_every_release_with_its_line(history_site):
    site = history_site / "site"
    notes = json.loads((site / "api" / "releases.json").read_text())
    record = reference(site)
    lines = {a["ref"]: [(s["path"], s["line"]) for s in a["sites"]] for a in record["history"]["releases"]}
    assert list(lines) == notes["releases"]  # in every covered release
    assert lines["v0.28.0"] == [(ADAPTER, 467)] and lines["v0.33.0"] == [(ADAPTER, 469)]
    html = (site / record["url"]).read_text()
    assert f"v0.28.0 – {notes['releases'][-1]}" in html
    for ref, [(path, line)] in lines.items():
        commit = next(a["commit"] for a in record["history"]["releases"] if a["ref"] == ref)
        assert re.search(rf"<td>{re.escape(ref)}</td>\s*<td><a href=\"https://github.com/vllm-project/vllm/blob/{commit}/{path}#L{line}-L{line}\"", html), ref


def test_release_notes_of_033_list_exactly_the_direct_diff(history_site, tmp_path_factory):
    site = history_site / "site"
    notes = {n["ref"]: n for n in json.loads((site / "api" / "releases.json").read_text())["notes"]}
    n33 = notes["v0.33.0"]
    assert n33["previous"] == "v0.32.0"
    old = {e.id for e in scan(tmp_path_factory, "v0.32.0").errors}
    new = {e.id for e in scan(tmp_path_factory, "v0.33.0").errors}
    assert set(n33["new"]) == new - old and set(n33["gone"]) == old - new
    assert len(n33["added"]) + len(n33["reworded"]) == len(new - old) > 100
    page = (history_site / "docs" / "releases" / "v0.33.0.md").read_text()
    assert f"**{len(new - old):,}** new" in page
    assert all(f"../errors/{i}.md" in page for i in n33["added"])
    assert (site / "releases" / "v0.33.0.html").is_file()


def test_a_traceback_line_of_028_pins_the_error_that_033_raises_two_lines_lower(history_site):
    site = history_site / "site"
    record = reference(site)
    index = json.loads((site / "api" / "lookup.json").read_text())
    (entry,) = [e for e in index["errors"] if e["i"] == record["id"]]
    sites = [[index["files"][path], line, function] for path, line, function in entry["s"]]
    assert [ADAPTER, 467, "_init_lmcache_engine"] in sites and [ADAPTER, 469, "_init_lmcache_engine"] in sites
    paste = (
        "Traceback (most recent call last):\n"
        f'  File "/usr/local/lib/python3.12/site-packages/{ADAPTER}", line 467, in _init_lmcache_engine\n'
        "ValueError: (message lost)\n"
    )
    found = lookup.rank(index, lookup.read_paste(paste))
    assert found[0].id == record["id"] and found[0].frame_agrees
