"""The JSON API, the generated-files sync, serving, and atomic, reproducible site builds."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from vllm_errors import pipeline
from vllm_errors.api import render_api, strict_schema
from vllm_errors.catalog import build_catalog
from vllm_errors.cli import main
from vllm_errors.knowledge import build_knowledge_base
from vllm_errors.model import Snapshot
from vllm_errors.scanner import scan_module
from vllm_errors.serve import make_server
from fixture_repo import make_repo

SNAP = Snapshot(repository="vllm-project/vllm", ref="v1", commit="a" * 40, date="2025-01-01T00:00:00+00:00", upstream_commit="a" * 40, version="1.0")

FILES = {
    "vllm/config/cache.py": textwrap.dedent(
        """
        class CacheConfig:
            def verify(self, block_size):
                if block_size not in (16, 32):
                    raise ValueError(f"block_size must be 16 or 32, got {block_size}")
        """
    ),
    "vllm/engine/core.py": "def step(x):\n    assert x is not None, 'step needs x'\n    raise NotImplementedError\n",
}


def fixture_kb():
    scans = [scan_module(path, code.encode()) for path, code in sorted(FILES.items())]
    return build_knowledge_base(build_catalog(SNAP, scans, len(scans)))


def test_every_record_validates_against_the_schema():
    kb = fixture_kb()
    files = render_api(kb)
    validator = Draft202012Validator(json.loads(files["api/schema.json"]))
    Draft202012Validator.check_schema(validator.schema)
    for record in kb.records:
        data = json.loads(files[f"api/errors/{record.id}.json"])
        assert list(validator.iter_errors(data)) == []
        assert files[f"api/errors/{record.id}"] == files[f"api/errors/{record.id}.json"]
        assert data["url"] == f"errors/{record.id}.html" and data["snapshot"]["commit"] == "a" * 40
    index = json.loads(files["api/errors.json"])
    assert sorted(e["id"] for e in index["errors"]) == sorted(r.id for r in kb.records)


def test_schema_is_closed_and_typed():
    validator = Draft202012Validator(strict_schema())
    record = json.loads(render_api(fixture_kb())[f"api/errors/{fixture_kb().records[0].id}.json"])
    assert not validator.is_valid({**record, "surprise": 1})
    assert not validator.is_valid({**record, "sites": "not a list"})
    del record["annotation"]
    assert not validator.is_valid(record)


def test_sync_tree_writes_changes_only_and_removes_stale_generated_files(tmp_path):
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "extra.css").write_text("hand-written")
    assert pipeline.sync_tree(tmp_path, {"errors/a.md": "A", "errors/b.md": "B"}, {"errors"}) == 2
    before = (tmp_path / "errors" / "a.md").stat().st_mtime_ns
    time.sleep(0.01)
    assert pipeline.sync_tree(tmp_path, {"errors/a.md": "A", "errors/c.md": "C"}, {"errors"}) == 1
    assert sorted(p.name for p in (tmp_path / "errors").iterdir()) == ["a.md", "c.md"]
    assert (tmp_path / "errors" / "a.md").stat().st_mtime_ns == before
    assert (tmp_path / "assets" / "extra.css").read_text() == "hand-written"


def test_serve_gives_api_addresses_as_json(tmp_path):
    (tmp_path / "api" / "errors").mkdir(parents=True)
    (tmp_path / "api" / "errors" / "0123456789abcdef").write_text('{"id": 1}')
    (tmp_path / "api" / "errors" / "0123456789abcdef.json").write_text('{"id": 1}')
    (tmp_path / "index.html").write_text("<html></html>")
    server = make_server(tmp_path, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        for path in ("/api/errors/0123456789abcdef", "/api/errors/0123456789abcdef.json"):
            with urllib.request.urlopen(base + path) as reply:
                assert reply.headers["Content-Type"] == "application/json"
                assert json.load(reply) == {"id": 1}
        with urllib.request.urlopen(base + "/index.html") as reply:
            assert reply.headers["Content-Type"].startswith("text/html")
    finally:
        server.shutdown()
        server.server_close()


def test_serve_without_a_site_is_a_one_line_error(tmp_path, capsys):
    assert main(["serve", "--site-dir", str(tmp_path)]) == 2
    assert "run 'vllm-errors build' first" in capsys.readouterr().err


# --- whole builds: these need the renderer and mkdocs, a few seconds each ------------------


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path, {"v1": {"vllm/__init__.py": "", **FILES}})


def build_args(repo, tmp_path, site):
    return ["build", "--repo", str(repo), "--ref", "v1", "--site-dir", str(site), "--docs-dir", str(tmp_path / "docs"),
            "--cache-dir", str(tmp_path / "cache"), "--no-progress"]


def test_build_is_reproducible_byte_for_byte(repo, tmp_path):
    first, second = tmp_path / "one", tmp_path / "two"
    assert main(build_args(repo, tmp_path, first)) == 0
    assert main(build_args(repo, tmp_path, second)) == 0
    assert tree_digest(first) == tree_digest(second)
    assert (first / "index.html").is_file() and (first / "api" / "schema.json").is_file()


def leftovers(folder: Path) -> list[str]:
    """What builds leave beside their outputs: staging folders, `.old`."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith((".site.", ".docs.")))


@pytest.mark.parametrize("failure, code", [
    pytest.param(pipeline.MkDocsException("boom"), 2, id="mkdocs-error"),
    pytest.param(KeyboardInterrupt(), 130, id="ctrl-c"),
    pytest.param(RuntimeError("bug"), None, id="internal-error"),
])  # fmt: skip
def test_failed_build_leaves_the_previous_site_and_docs_intact(repo, tmp_path, monkeypatch, failure, code):
    site, docs = tmp_path / "site", tmp_path / "docs"
    assert main(build_args(repo, tmp_path, site)) == 0
    before = tree_digest(site), tree_digest(docs)

    def half_then_fail(config):
        Path(config.site_dir, "index.html").write_text("half")
        Path(config.docs_dir, "index.md").write_text("half")
        raise failure

    monkeypatch.setattr(pipeline, "mkdocs_build", half_then_fail)
    if code is None:
        with pytest.raises(RuntimeError, match="bug"):
            main(build_args(repo, tmp_path, site))
    else:
        assert main(build_args(repo, tmp_path, site)) == code
    assert (tree_digest(site), tree_digest(docs)) == before
    assert leftovers(tmp_path) == []


def test_killed_build_leaves_the_previous_site_intact(repo, tmp_path):
    site, docs = tmp_path / "site", tmp_path / "docs"
    assert main(build_args(repo, tmp_path, site)) == 0
    before = tree_digest(site), tree_digest(docs)
    # Kill the build as soon as mkdocs has started writing the new site.
    proc = subprocess.Popen([sys.executable, "-m", "vllm_errors.cli", *build_args(repo, tmp_path, site)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        staging = list(tmp_path.glob(".site.*.building"))
        if staging and any(staging[0].iterdir()):
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the build finished before it could be killed"
    assert (tree_digest(site), tree_digest(docs)) == before
    assert leftovers(tmp_path)  # the dead build's staging folders
    assert main(build_args(repo, tmp_path, site)) == 0  # and the next build cleans up after it
    assert leftovers(tmp_path) == []


def test_a_dead_builds_staging_folders_go_with_the_next_build(repo, tmp_path):
    site = tmp_path / "site"
    assert main(build_args(repo, tmp_path, site)) == 0
    for name in (".site.x.building", ".docs.x.building", ".site.old"):
        (tmp_path / name / "errors").mkdir(parents=True)
        (tmp_path / name / "errors" / "junk.html").write_text("54 MB of it")
    (tmp_path / ".site.y.building").mkdir()
    (tmp_path / ".site.y.building" / pipeline.COMPLETE).touch()  # whole, but a site is in place: garbage all the same
    (tmp_path / ".site.x.building.keep").mkdir()  # not a staging folder's name: not ours to remove
    assert main(build_args(repo, tmp_path, site)) == 0
    assert leftovers(tmp_path) == [".site.x.building.keep"]
    assert not (site / "errors" / "junk.html").exists() and not (site / pipeline.COMPLETE).exists()


def fail_mkdocs(config):
    raise pipeline.MkDocsException("boom")


def test_a_partial_old_site_is_never_put_in_place(repo, tmp_path, monkeypatch):
    site = tmp_path / "site"
    assert main(build_args(repo, tmp_path, site)) == 0
    fresh = tree_digest(site)
    # A build killed while it removed `.site.old`, and then build/site removed by hand: 702 files, no index.html.
    site.rename(tmp_path / ".site.old")
    (tmp_path / ".site.old" / "index.html").unlink()
    monkeypatch.setattr(pipeline, "mkdocs_build", fail_mkdocs)
    assert main(build_args(repo, tmp_path, site)) == 2
    assert not site.exists() and leftovers(tmp_path) == []
    monkeypatch.undo()
    assert main(build_args(repo, tmp_path, site)) == 0
    assert tree_digest(site) == fresh


@pytest.mark.parametrize("complete", [True, False], ids=["complete", "partial"])
def test_only_a_complete_staging_folder_takes_the_place_of_a_missing_site(repo, tmp_path, monkeypatch, complete):
    # A build killed between the two renames of its swap: no site, the old one at `.site.old`, the new one whole.
    site = tmp_path / "site"
    staging = tmp_path / ".site.k.building"
    (staging / "errors").mkdir(parents=True)
    (staging / "errors" / "e.html").write_text("new")
    if complete:
        (staging / "index.html").write_text("new")
        (staging / pipeline.COMPLETE).touch()
    (tmp_path / ".site.old").mkdir()
    (tmp_path / ".site.old" / "index.html").write_text("old")
    monkeypatch.setattr(pipeline, "mkdocs_build", fail_mkdocs)
    assert main(build_args(repo, tmp_path, site)) == 2
    assert leftovers(tmp_path) == []
    if complete:
        assert sorted(tree_digest(site)) == ["errors/e.html", "index.html"] and (site / "index.html").read_text() == "new"
    else:
        assert not site.exists()


def test_a_second_build_waits_for_the_first(repo, tmp_path, capsys):
    import fcntl

    site = tmp_path / "site"
    lock = os.open(tmp_path, os.O_RDONLY)  # as a running build holds it
    fcntl.flock(lock, fcntl.LOCK_EX)
    (tmp_path / ".site.r.building").mkdir()  # the running build's staging folder
    result: list[int] = []
    thread = threading.Thread(target=lambda: result.append(main(build_args(repo, tmp_path, site))))
    thread.start()
    said, deadline = "", time.monotonic() + 60
    while "waiting for another vllm-errors build" not in said and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.05)
        said += capsys.readouterr().err
    time.sleep(0.2)
    assert "waiting for another vllm-errors build" in said
    assert thread.is_alive() and (tmp_path / ".site.r.building").is_dir() and not site.exists()
    os.close(lock)
    thread.join(60)
    assert result == [0] and (site / "index.html").is_file() and leftovers(tmp_path) == []


def test_outputs_that_a_build_must_not_replace_are_refused(repo, tmp_path, capsys):
    hand_written = Path(pipeline.DATA_DIR, "site")
    before = sorted(p.name for p in hand_written.iterdir())
    assert main([*build_args(repo, tmp_path, tmp_path / "site"), "--docs-dir", str(hand_written)]) == 2  # the last one counts
    assert "the hand-written pages" in capsys.readouterr().err
    assert sorted(p.name for p in hand_written.iterdir()) == before
    assert main([*build_args(repo, tmp_path, tmp_path / "docs" / "site")]) == 2
    assert "overlap" in capsys.readouterr().err
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "thesis.tex").write_text("mine")
    assert main(build_args(repo, tmp_path, tmp_path / "site")) == 2
    assert "did not write" in capsys.readouterr().err and (tmp_path / "docs" / "thesis.tex").read_text() == "mine"


# Names that once shared a page: a subsystem `index` (the overview's name), a type `Index` with a page of
# its own (TYPE_PAGE_MIN errors), and the subsystems `a/b` and `a-b`.
COLLIDING = {
    "vllm/__init__.py": "",
    "vllm/index/mod.py": "".join(f"def f{i}(x):\n    raise Index(f'index error {i}: {{x}}')\n" for i in range(5)),
    "vllm/a/b/x.py": "def g():\n    raise ValueError('raised under a/b')\n",
    "vllm/a-b/y.py": "def h():\n    raise ValueError('raised under a-b')\n",
}


def linked_errors(page: Path) -> set[str]:
    return set(re.findall(r'href="\.\./errors/([0-9a-f]{16})\.html"', page.read_text(encoding="utf-8")))


def test_names_that_once_collided_each_keep_a_page(tmp_path):
    repo = make_repo(tmp_path, {"v1": COLLIDING})
    site = tmp_path / "site"
    assert main(build_args(repo, tmp_path, site)) == 0
    errors = {e["id"]: e for e in json.loads((site / "api" / "errors.json").read_text())["errors"]}
    assert sorted({e["subsystem"] for e in errors.values()}) == ["a-b", "a/b", "index"]
    subsystem_pages = [p for p in (site / "subsystems").glob("*.html") if p.name != "index.html"]
    assert len(subsystem_pages) == 3
    for page in subsystem_pages:  # each subsystem's errors on a page of their own
        assert len({errors[i]["subsystem"] for i in linked_errors(page)}) == 1
    assert set().union(*map(linked_errors, subsystem_pages)) == set(errors)
    for folder in ("subsystems", "types"):  # the overviews survive
        overview = (site / folder / "index.html").read_text(encoding="utf-8")
        assert f"<title>Errors by {folder[:-1]} - vLLM errors</title>" in overview and not linked_errors(site / folder / "index.html")
    type_pages = {p.name: linked_errors(p) for p in (site / "types").glob("*.html") if p.name != "index.html"}
    assert sorted(map(len, type_pages.values())) == [2, 5]  # Index on its own page, ValueError with the other built-ins
