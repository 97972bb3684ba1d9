"""The JSON API, the generated-files sync, serving, and atomic, reproducible site builds."""

from __future__ import annotations

import hashlib
import json
import os
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

from extractor import pipeline
from extractor.api import render_api, strict_schema
from extractor.catalog import build_catalog
from extractor.cli import main
from extractor.knowledge import build_knowledge_base
from extractor.model import Snapshot
from extractor.scanner import scan_module
from extractor.serve import make_server
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


def test_failed_build_leaves_the_previous_site_intact(repo, tmp_path, monkeypatch):
    site = tmp_path / "site"
    assert main(build_args(repo, tmp_path, site)) == 0
    before = tree_digest(site)

    def half_then_fail(config):
        Path(config.site_dir, "index.html").write_text("half")
        raise pipeline.MkDocsException("boom")

    monkeypatch.setattr(pipeline, "mkdocs_build", half_then_fail)
    assert main(build_args(repo, tmp_path, site)) == 2
    assert tree_digest(site) == before
    assert not list(tmp_path.glob(".site.*"))


def test_killed_build_leaves_the_previous_site_intact(repo, tmp_path):
    site = tmp_path / "site"
    assert main(build_args(repo, tmp_path, site)) == 0
    before = tree_digest(site)
    # Kill the build as soon as mkdocs has started writing the new site.
    proc = subprocess.Popen([sys.executable, "-m", "extractor.cli", *build_args(repo, tmp_path, site)],
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
    assert tree_digest(site) == before
    assert main(build_args(repo, tmp_path, site)) == 0  # and the next build cleans up after it
    assert not list(tmp_path.glob(".site.*"))
