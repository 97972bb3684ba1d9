"""Releases: lineage between consecutive catalogs, each error's history, release notes, and `vllm-errors update`."""

from __future__ import annotations

import hashlib
import threading
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from vllm_errors import pipeline, source
from vllm_errors.cli import main
from vllm_errors.history import build_history, covering_catalog
from vllm_errors.model import UserError
from fixture_repo import make_repo
from pagefind_index import indexed_pages

V1 = {
    "vllm/__init__.py": "",
    "vllm/engine.py": (
        "def keep(x):\n"
        "    if x < 0:\n"
        "        raise ValueError('x must not be negative')\n"
        "\n"
        "\n"
        "def move(y):\n"
        "    raise ValueError('y is always wrong')\n"
        "\n"
        "\n"
        "def reword(z):\n"
        "    raise ValueError(f'z is too large: {z}')\n"
        "\n"
        "\n"
        "def drop():\n"
        "    raise RuntimeError('this one goes away')\n"
    ),
}
# v2: two lines above `move` (it moves, `keep` does not), `reword` reworded, `drop` gone, `fresh` new.
V2 = {
    "vllm/engine.py": V1["vllm/engine.py"]
    .replace("def move(", "# A comment,\n# two lines long.\ndef move(")
    .replace("z is too large", "z is much too large")
    .replace("def drop():\n    raise RuntimeError('this one goes away')\n", "def fresh():\n    raise KeyError('a brand new error')\n")
}
V3 = {"vllm/other.py": "def elsewhere():\n    raise TypeError('in another file')\n"}


@pytest.fixture
def repo(tmp_path):
    return make_repo(tmp_path, {"v0.1.0": V1, "v0.2.0": V2, "v0.3.0": V3, "v0.3.1rc1": {}})


def catalogs(repo, tmp_path, refs):
    request = pipeline.ScanRequest(repo=str(repo), ref="", cache_dir=tmp_path / "cache", jobs=1, progress=False)
    return [pipeline.scan_release(pipeline.ScanRequest(**{**request.__dict__, "ref": ref}))[0] for ref in refs]


def ids_by_template(*cats):
    return {e.template: e.id for c in cats for e in c.errors}


def test_lineage_covers_every_case(repo, tmp_path):
    cats = catalogs(repo, tmp_path, ["v0.1.0", "v0.2.0", "v0.3.0"])
    ids = ids_by_template(*cats)
    history = build_history(cats)
    first, second, third = history.notes
    assert first.previous is None and first.errors == 4 and first.new == ()
    assert second.previous == "v0.1.0"
    assert second.added == (ids["a brand new error"],)
    assert second.removed == (ids["this one goes away"],)
    assert second.reworded == ((ids["z is too large: {z}"], ids["z is much too large: {z}"]),)
    assert second.moved == (ids["y is always wrong"],)
    assert second.unchanged == 1  # `keep`
    # The notes' new and gone are exactly the direct difference of the two catalogs.
    assert set(second.new) == {e.id for e in cats[1].errors} - {e.id for e in cats[0].errors}
    assert set(second.gone) == {e.id for e in cats[0].errors} - {e.id for e in cats[1].errors}
    assert third.added == (ids["in another file"],) and third.moved == () and third.unchanged == 4

    old, new = ids["z is too large: {z}"], ids["z is much too large: {z}"]
    assert history.errors[old].status == "removed" and history.errors[old].removed_in == "v0.2.0"
    assert history.errors[old].superseded_by == new and history.errors[new].supersedes == (old,)
    gone = history.errors[ids["this one goes away"]]
    assert gone.removed_in == "v0.2.0" and gone.superseded_by is None
    moved = history.errors[ids["y is always wrong"]]
    assert [(a.ref, a.sites[0].line) for a in moved.releases] == [("v0.1.0", 7), ("v0.2.0", 9), ("v0.3.0", 9)]


def test_covering_catalog_keeps_removed_errors_as_their_last_release_had_them(repo, tmp_path):
    cats = catalogs(repo, tmp_path, ["v0.1.0", "v0.2.0", "v0.3.0"])
    catalog, snapshots = covering_catalog(cats)
    ids = ids_by_template(*cats)
    assert {e.id for e in catalog.errors} == {e.id for c in cats for e in c.errors}
    assert snapshots[ids["this one goes away"]].ref == "v0.1.0"
    assert ids["a brand new error"] not in snapshots


def test_release_tags_and_selection(repo):
    tags = source.release_tags(repo)
    assert tags == ["v0.1.0", "v0.2.0", "v0.3.0"]  # no release candidates
    assert source.select_releases(tags, 2) == ["v0.2.0", "v0.3.0"]
    assert source.select_releases(tags, 1, since="v0.1.0") == tags  # --since widens past the count
    assert source.select_releases(tags, since="v0.0.9") == tags  # a release the repository lacks: from the next one on
    assert source.select_releases(tags, since="v0.1.5") == tags[1:]
    assert source.select_releases(tags, 12, until="v0.2.0") == ["v0.1.0", "v0.2.0"]
    for bad in (dict(since="v9"), dict(until="nope"), dict(count=0), dict(since="v0.3.0", until="v0.1.0")):
        with pytest.raises(UserError):
            source.select_releases(tags, **{"count": 12, **bad})


def tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob("*")) if p.is_file()}


def update_args(repo, tmp_path, site, cache="cache", *extra):
    return ["update", "--repo", str(repo), "--source", "git", "--site-dir", str(site), "--docs-dir", str(tmp_path / f"docs-{site.name}"),
            "--cache-dir", str(tmp_path / cache), "--no-progress", "--jobs", "1", "--annotations", str(tmp_path / "no-notes"), *extra]


def test_update_builds_pages_with_history_and_release_notes(repo, tmp_path, capsys):
    site = tmp_path / "site"
    assert main(update_args(repo, tmp_path, site)) == 0
    out = capsys.readouterr().out
    assert "[3/3] scanned v0.3.0" in out and "v0.2.0: 4 errors; since v0.1.0: 1 added, 1 removed, 1 reworded, 1 moved" in out
    docs = tmp_path / "docs-site"
    cats = catalogs(repo, tmp_path, ["v0.1.0", "v0.2.0", "v0.3.0"])
    ids = ids_by_template(*cats)

    moved = (docs / "errors" / f"{ids['y is always wrong']}.md").read_text()
    assert "**Releases:** v0.1.0 – v0.3.0, every release this site covers." in moved
    fresh = (docs / "errors" / f"{ids['a brand new error']}.md").read_text()
    assert "**Releases:** v0.2.0 – v0.3.0 (this site covers v0.1.0 – v0.3.0)." in fresh
    assert "| v0.1.0 | [<code>vllm/<wbr>engine\\.py:7</code>]" in moved and "| v0.2.0 | [<code>vllm/<wbr>engine\\.py:9</code>]" in moved

    reworded = (docs / "errors" / f"{ids['z is too large: {z}']}.md").read_text()
    assert 'Not in vLLM v0.3.0' in reworded and f"({ids['z is much too large: {z}']}.md)" in reworded
    assert "Reworded in v0.2.0" in reworded
    removed = (docs / "errors" / f"{ids['this one goes away']}.md").read_text()
    assert "Removed in v0.2.0" in removed and "**Releases:** v0.1.0." in removed

    notes = (docs / "releases" / "v0.2.0.md").read_text()
    assert "**2** new: 1 added and 1 rewordings" in notes and f"{ids['a brand new error']}.md" in notes
    assert (site / "releases" / "v0.2.0.html").is_file() and (site / "releases" / "index.html").is_file()
    nav = json.loads((docs / "generated" / "nav.json").read_text())["nav"]
    assert {"Releases": ["releases/index.md", {"v0.3.0": "releases/v0.3.0.md"}, {"v0.2.0": "releases/v0.2.0.md"}, {"v0.1.0": "releases/v0.1.0.md"}]} in nav

    assert "It covers 3 releases, v0.1.0 – v0.3.0" in (docs / "index.md").read_text()
    search = indexed_pages(site)
    assert any("a brand new error" in text for text in search.values())  # search covers the newest release
    assert not any("this one goes away" in text for text in search.values()) and f"errors/{ids['this one goes away']}.html" not in search
    # Indexes list the newest release's errors; removed ones are reached from the release notes.
    assert ids["this one goes away"] not in (docs / "subsystems" / "vllm.md").read_text()
    record = json.loads((site / "api" / "errors" / f"{ids['this one goes away']}.json").read_text())
    assert record["history"]["status"] == "removed" and record["snapshot"]["ref"] == "v0.1.0"
    schema = json.loads((site / "api" / "schema.json").read_text())
    assert list(Draft202012Validator(schema).iter_errors(record)) == []


def test_an_interrupted_update_resumes_from_the_cache_with_identical_output(repo, tmp_path, monkeypatch, capsys):
    clean = tmp_path / "clean"
    assert main(update_args(repo, tmp_path, clean, "cache-clean")) == 0

    real = pipeline.scan_release
    calls = []

    def interrupted(request):
        calls.append(request.ref)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(request)

    monkeypatch.setattr(pipeline, "scan_release", interrupted)
    site = tmp_path / "resumed"
    assert main(update_args(repo, tmp_path, site, "cache-resumed")) == 130
    assert "run again to resume" in capsys.readouterr().err and not site.exists()
    monkeypatch.setattr(pipeline, "scan_release", real)
    assert main(update_args(repo, tmp_path, site, "cache-resumed")) == 0
    assert "2 files (2 cached)" in capsys.readouterr().out  # v0.1.0's files came from the interrupted run's cache
    assert tree_digest(site) == tree_digest(clean)


def test_update_with_a_bad_range_is_a_one_line_error(repo, tmp_path, capsys):
    assert main(update_args(repo, tmp_path, tmp_path / "s", "cache", "--since", "v7.0.0")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--since v7.0.0: no such release tag" in err
    # A local path that is not there is the user's to fix, not a reason to go to the package index.
    args = update_args(tmp_path / "nowhere", tmp_path, tmp_path / "s", "cache")
    args[args.index("--source") + 1] = "auto"
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "does not exist" in err


def test_lookup_pins_a_traceback_line_of_an_older_release(repo, tmp_path, capsys):
    site = tmp_path / "site"
    assert main(update_args(repo, tmp_path, site)) == 0
    ids = ids_by_template(*catalogs(repo, tmp_path, ["v0.1.0", "v0.2.0", "v0.3.0"]))
    capsys.readouterr()
    # v0.1.0 raised `y is always wrong` at line 7, v0.2.0 at line 9; the message is cut beyond recognition:
    # the line of the release that printed it pins it, in the function the frame names.
    paste = 'Traceback (most recent call last):\n  File "/env/lib/vllm/engine.py", line 7, in move\nValueError: ???\n'
    assert main(["explain", "--site", str(site), "--json", paste]) == 0
    matches = json.loads(capsys.readouterr().out)["answer"]["matches"]
    assert matches[0]["id"] == ids["y is always wrong"]
    # The same line in another function is other code (another release's): it pins nothing.
    assert main(["explain", "--site", str(site), "--json", paste.replace("in move", "in wrapper")]) == 1
    assert json.loads(capsys.readouterr().out)["kind"] == "none"
    # The removed error is found too, on its own page, by its old message.
    assert main(["explain", "--site", str(site), "--json", "RuntimeError: this one goes away"]) == 0
    assert json.loads(capsys.readouterr().out)["answer"]["matches"][0]["id"] == ids["this one goes away"]
    assert main(["explain", "--site", str(site), "ValueError: z is too large: 7"]) == 0
    out = capsys.readouterr().out
    assert "vLLM raised it up to v0.1.0; reworded in v0.2.0: " in out and f"{ids['z is much too large: {z}']}.html" in out


def test_update_without_git_access_imports_the_releases_from_the_package_index(tmp_path, monkeypatch, capsys):
    from test_mirror import COMMITS, Index, UPLOADED, sdist

    index = Index()
    for version, commit in COMMITS.items():
        index.add(f"vllm-{version}.tar.gz", sdist(version, commit), UPLOADED[version])
    thread = threading.Thread(target=index.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        unreachable = "http://127.0.0.1:9/vllm-project/vllm.git"  # the discard port: nothing listens there
        site = tmp_path / "site"
        args = update_args(unreachable, tmp_path, site, "cache", "--releases", "2", "--github-repo", "vllm-project/vllm")
        args[args.index("--source") + 1] = "auto"
        assert main(args) == 0
    finally:
        index.shutdown()
        index.server_close()
        thread.join()
    captured = capsys.readouterr()
    assert "importing the releases from the package index instead" in captured.err
    assert index.url.split("/simple")[0] not in captured.out + captured.err  # the index's address is never printed
    assert "[2/2] scanned v0.4.0" in captured.out
    record = json.loads(next((site / "api" / "errors").glob("*.json")).read_text())
    assert [a["ref"] for a in record["history"]["releases"]] == ["v0.3.0", "v0.4.0"]
    assert [a["commit"] for a in record["history"]["releases"]] == [COMMITS["0.3.0"], COMMITS["0.4.0"]]
    assert record["snapshot"]["upstream_commit"] == COMMITS["0.4.0"]


def test_an_error_moved_to_another_file_and_reworded_is_one_error():
    from vllm_errors.catalog import build_catalog
    from vllm_errors.history import release_notes
    from vllm_errors.model import Snapshot
    from vllm_errors.scanner import scan_module

    def catalog(ref, files):
        snap = Snapshot("vllm-project/vllm", ref, ref * 8, "2025-01-01T00:00:00+00:00", ref * 8, None)
        return build_catalog(snap, [scan_module(p, c.encode()) for p, c in files.items()], len(files))

    old = catalog("v1", {"vllm/a.py": "def load(path):\n    raise FileNotFoundError(f'no weights found at {path}')\n"})
    new = catalog("v2", {"vllm/b.py": "def load(path):\n    raise FileNotFoundError(f'no weights were found at {path}')\n",
                         "vllm/c.py": "def other():\n    raise FileNotFoundError('something else entirely')\n"})
    notes = release_notes(old, new)
    (gone,) = notes.gone
    assert len(notes.new) == 2 and len(notes.reworded) == 1 and notes.reworded[0][0] == gone
    assert {e.template for e in new.errors if e.id == notes.reworded[0][1]} == {"no weights were found at {path}"}
    assert len(notes.added) == 1 and notes.removed == ()


def test_related_errors_of_a_current_error_are_current_ones(repo, tmp_path):
    from vllm_errors.knowledge import build_knowledge_base

    cats = catalogs(repo, tmp_path, ["v0.1.0", "v0.2.0", "v0.3.0"])
    history = build_history(cats)
    catalog, _ = covering_catalog(cats)
    kb = build_knowledge_base(catalog, (), (), history=history)
    ids = ids_by_template(*cats)
    by_id = {r.id: r for r in kb.records}
    removed = {ids["this one goes away"], ids["z is too large: {z}"]}
    keep = by_id[ids["x must not be negative"]]
    # The same file holds both removed errors: a page of the newest release lists only the current ones.
    assert keep.related and not removed & set(keep.related)
    assert ids["a brand new error"] in keep.related
    # A removed error's page still lists what it relates to, removed or not.
    assert ids["z is too large: {z}"] in by_id[ids["this one goes away"]].related


def test_a_message_whose_placeholder_grew_is_the_same_error_not_its_neighbours():
    """vLLM 0.28.0 appended a conditional part to "Engine core initialization failed ... {finished}" and raised a new
    "Frontend process failed ..." beside it: the reports of the old message belong to the grown one."""
    from vllm_errors.catalog import build_catalog
    from vllm_errors.history import release_notes
    from vllm_errors.model import Snapshot
    from vllm_errors.scanner import scan_module

    def catalog(ref, body):
        snap = Snapshot("vllm-project/vllm", ref, ref * 8, "2025-01-01T00:00:00+00:00", ref * 8, None)
        return build_catalog(snap, [scan_module("vllm/u.py", f"def wait(finished, front):\n{body}".encode())], 1)

    old = catalog("v1", "    raise RuntimeError(f'Engine core initialization failed. See root cause above. Failed core proc(s): {finished}')\n")
    new = catalog("v2", (
        "    failed_frontend_procs = front\n"
        "    if failed_frontend_procs and not finished:\n"
        "        raise RuntimeError('Frontend process failed during engine core initialization. See root cause above. '\n"
        "                           f'Failed frontend proc(s): {failed_frontend_procs}')\n"
        "    raise RuntimeError('Engine core initialization failed. See root cause above. '\n"
        "                       f'Failed core proc(s): {finished}'\n"
        "                       f'{(f\", failed frontend proc(s): {failed_frontend_procs}\" if failed_frontend_procs else \"\")}')\n"))
    (pair,) = release_notes(old, new).reworded
    assert next(e.template for e in new.errors if e.id == pair[1]).startswith("Engine core initialization failed")
