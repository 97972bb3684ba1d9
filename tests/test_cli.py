"""End to end: a tagged fixture repository driven through the CLI's main([...])."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from vllm_errors.cli import main
from fixture_repo import make_repo

RELEASE = {
    "vllm/__init__.py": "",
    "vllm/config/model.py": (
        "class ModelConfig:\n"
        "    def verify(self, max_model_len, derived):\n"
        "        if max_model_len > derived:\n"
        "            raise ValueError(\n"
        "                f'User-specified max_model_len ({max_model_len}) is greater than '\n"
        "                f'the derived max_model_len ({derived}).'\n"
        "            )\n"
    ),
    "vllm/engine.py": "def run(x):\n    assert x is not None, 'engine needs x'\n",
    "vllm/third_party/vendored.py": "raise ValueError('vendored')\n",
}


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path, {"v1": RELEASE, "v2": {"vllm/broken.py": "def f(:\n"}})


def run_scan(repo, ref, out, cache, *extra):
    return main(["scan", "--repo", str(repo), "--ref", ref, "--output", str(out), "--cache-dir", str(cache), "--no-progress", *extra])


def test_scan_writes_the_catalog_and_a_summary(repo, tmp_path, capsys):
    out = tmp_path / "catalog.json"
    assert run_scan(repo, "v1", out, tmp_path / "cache") == 0
    data = json.loads(out.read_text())
    assert set(data) >= {"snapshot", "errors", "exception_classes", "problems"}
    assert data["snapshot"]["ref"] == "v1" and len(data["snapshot"]["commit"]) == 40
    templates = sorted(e["template"] for e in data["errors"])
    assert templates == [
        "User-specified max_model_len ({max_model_len}) is greater than the derived max_model_len ({derived}).",
        "engine needs x",
    ]
    site = next(e for e in data["errors"] if e["kind"] == "raise")["sites"][0]
    assert (site["path"], site["line"], site["end_line"], site["function"]) == ("vllm/config/model.py", 4, 7, "ModelConfig.verify")
    summary = capsys.readouterr().out
    assert "3 files (0 cached), 2 sites, 2 errors, 0 problems" in summary


def test_second_run_uses_the_cache_and_output_is_byte_identical(repo, tmp_path, capsys):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    run_scan(repo, "v1", first, tmp_path / "cache")
    run_scan(repo, "v1", second, tmp_path / "cache", "--jobs", "2")
    assert "3 files (3 cached)" in capsys.readouterr().out
    assert first.read_bytes() == second.read_bytes()


def test_problems_are_recorded_and_shown_by_the_exit_code(repo, tmp_path, capsys):
    out = tmp_path / "c.json"
    assert run_scan(repo, "v2", out, tmp_path / "cache") == 1
    data = json.loads(out.read_text())
    assert [(p["path"], p["kind"]) for p in data["problems"]] == [("vllm/broken.py", "syntax")]
    assert len(data["errors"]) == 2  # the rest of the release is still scanned
    assert re.search(r"problem: vllm/broken\.py:[0-9]+: syntax: ", capsys.readouterr().err)


def test_a_relative_cache_directory_works_with_parallel_scans(repo, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert run_scan(repo, "v1", tmp_path / "a.json", Path("relative-cache"), "--jobs", "2") == 0
    assert run_scan(repo, "v1", tmp_path / "b.json", Path("relative-cache"), "--jobs", "2") == 0
    assert "3 files (3 cached)" in capsys.readouterr().out
    assert (tmp_path / "relative-cache").is_dir()


BAD = [
    (["--ref", "v9"], "unknown ref"),
    (["--ref", "--upload-pack=touch x"], "not a valid ref"),
    (["--ref", "v1", "--jobs", "-1"], "--jobs"),
    (["--ref", "v1", "--include", "nothing/*"], "no Python files match"),
]


@pytest.mark.parametrize(("args", "says"), BAD, ids=[b[1] for b in BAD])
def test_bad_input_is_one_line_and_exit_2(repo, tmp_path, capsys, args, says):
    out = tmp_path / "never.json"
    code = main(["scan", "--repo", str(repo), "--output", str(out), "--cache-dir", str(tmp_path / "cache"), *args])
    err = capsys.readouterr().err
    assert code == 2
    assert says in err and err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


def test_not_a_repository(tmp_path, capsys):
    assert main(["scan", "--repo", str(tmp_path), "--ref", "v1", "-o", str(tmp_path / "x.json"), "--cache-dir", str(tmp_path / "c")]) == 2
    assert "not a git repository" in capsys.readouterr().err


def test_a_reader_that_goes_away_is_no_error(monkeypatch):
    """`vllm-errors explain ... | head`: the pipe closes early; the command stops without a traceback."""
    from vllm_errors import cli

    def closed(args):
        raise BrokenPipeError

    monkeypatch.setattr(cli, "_explain", closed)
    monkeypatch.setattr(cli.os, "dup2", lambda *a: None)
    assert cli.main(["explain", "x"]) == 0
