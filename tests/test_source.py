"""Tests of vllm_errors.source against small git repositories built in tmp_path."""

from __future__ import annotations

import git
import pytest

from vllm_errors.model import UserError
from vllm_errors.source import github_slug, open_repository, read_files, read_snapshot
from fixture_repo import UTC_DATES, add_release, make_repo

BASE = {
    "vllm/__init__.py": "",
    "vllm/engine.py": "def run():\n    raise ValueError('no engine')\n",
    "vllm/notes.txt": "not python\n",
    "vllm/third_party/lib.py": "X = 1\n",
    "vllm/vllm_flash_attn/ops.py": "Y = 2\n",
    "tools/build.py": "print('build')\n",
    "setup.py": "",
}


@pytest.fixture
def origin(tmp_path):
    return make_repo(tmp_path, {"v1": BASE, "v2": {"vllm/engine.py": "def run():\n    pass\n"}})


def paths(files):
    return [f.path for f in files]


# -- read_files ---------------------------------------------------------------------------------


def test_default_patterns_keep_vllm_python_and_drop_vendored_dirs(origin):
    assert paths(read_files(origin, "v1")) == ["vllm/__init__.py", "vllm/engine.py"]


def test_custom_include_and_exclude(origin):
    assert paths(read_files(origin, "v1", include=("*",), exclude=())) == [
        "setup.py", "tools/build.py", "vllm/__init__.py", "vllm/engine.py",
        "vllm/third_party/lib.py", "vllm/vllm_flash_attn/ops.py",
    ]
    assert paths(read_files(origin, "v1", include=("tools/*", "vllm/*"), exclude=("*/__init__.py", "vllm/v*"))) == [
        "tools/build.py", "vllm/engine.py", "vllm/third_party/lib.py",
    ]


def test_data_and_blob_ids_match_what_was_committed(origin):
    files = {f.path: f for f in read_files(origin, "v1")}
    assert files["vllm/engine.py"].data == BASE["vllm/engine.py"].encode()
    scratch = origin.parent / "scratch"
    with git.Repo(origin) as r:
        for f in files.values():
            scratch.write_text(BASE[f.path])
            assert f.data == scratch.read_bytes()
            assert f.blob == r.git.hash_object("--no-filters", str(scratch))


def test_each_ref_reads_its_own_tree(origin):
    assert {f.path: f.data for f in read_files(origin, "v2")}["vllm/engine.py"] == b"def run():\n    pass\n"


def test_working_tree_changes_are_not_seen(origin):
    (origin / "vllm/engine.py").write_text("edited, never committed\n")
    (origin / "vllm/untracked.py").write_text("NEW = 1\n")
    with git.Repo(origin) as r:
        r.git.add("vllm/untracked.py")  # staged is still not committed
    files = read_files(origin, "v2")
    assert paths(files) == ["vllm/__init__.py", "vllm/engine.py"]
    assert files[1].data == b"def run():\n    pass\n"


def test_executables_kept_symlinks_and_submodules_skipped(tmp_path):
    path = make_repo(tmp_path, {"v1": {"vllm/a.py": "A = 1\n", "vllm/tool.py": "#!/usr/bin/env python\n"}})
    (path / "vllm/tool.py").chmod(0o755)
    (path / "vllm/link.py").symlink_to("a.py")
    with git.Repo(path) as r:
        r.git.add("vllm/tool.py", "vllm/link.py")
        r.git.update_index("--add", "--cacheinfo", f"160000,{r.head.commit.hexsha},vllm/sub.py")
        add_release(r, "v2", {})
        modes = sorted(line.split()[0] for line in r.git.ls_tree("-r", "v2", "vllm").splitlines())
    assert modes == ["100644", "100755", "120000", "160000"]
    assert paths(read_files(path, "v2")) == ["vllm/a.py", "vllm/tool.py"]


# -- read_snapshot --------------------------------------------------------------------------------


def test_tag_branch_short_and_full_commit_agree(origin):
    with git.Repo(origin) as r:
        full = r.commit("v1").hexsha
        r.create_head("release-1", "v1")
        r.create_tag("v1-annotated", ref="v1", message="annotated tag")
    snapshots = [read_snapshot(origin, ref, "o/n") for ref in ("v1", "v1-annotated", "release-1", full[:8], full)]
    assert {(s.commit, s.date) for s in snapshots} == {(full, UTC_DATES[0])}
    assert [s.ref for s in snapshots] == ["v1", "v1-annotated", "release-1", full[:8], full]
    assert read_snapshot(origin, "main", "o/n").date == UTC_DATES[1]


def test_without_version_file_upstream_is_the_commit(origin):
    snapshot = read_snapshot(origin, "v2", "vllm-project/vllm")
    assert snapshot.repository == "vllm-project/vllm"
    assert snapshot.upstream_commit == snapshot.commit
    assert snapshot.version is None


@pytest.mark.parametrize(
    ("text", "upstream", "version"),
    [
        ("__version__ = version = '0.28.0'\n__commit_id__ = commit_id = 'g2cf0a6915'\n", "2cf0a6915", "0.28.0"),
        ('version = "1.0.0rc1"\ncommit_id = "abcdef1234"\n', "abcdef1234", "1.0.0rc1"),
        ("version: str\n__version__ = '2.0'\n__commit_id__ = None\n", None, "2.0"),
        ("# nothing here\n", None, None),
    ],
    ids=["chained-with-g", "double-quotes-no-g", "commit-id-none", "empty"],
)
def test_version_file_gives_upstream_commit_and_version(tmp_path, text, upstream, version):
    path = make_repo(tmp_path, {"v1": {"vllm/_version.py": text}})
    snapshot = read_snapshot(path, "v1", "o/n")
    assert snapshot.upstream_commit == (upstream or snapshot.commit)
    assert snapshot.version == version


# -- open_repository ------------------------------------------------------------------------------


def test_local_paths_open_in_place(origin, tmp_path):
    assert open_repository(str(origin), tmp_path / "cache") == origin.resolve()
    with git.Repo.clone_from(origin, tmp_path / "bare.git", bare=True):
        pass
    assert read_snapshot(open_repository(str(tmp_path / "bare.git"), tmp_path / "cache"), "v1", "o/n").commit
    assert not (tmp_path / "cache").exists()


def test_url_is_cloned_once_and_fetched_later(origin, tmp_path):
    cache = tmp_path / "cache"
    url = origin.as_uri()
    first = open_repository(url, cache)
    assert read_snapshot(first, "v2", "o/n").date == UTC_DATES[1]
    with git.Repo(origin) as r:
        add_release(r, "v3", {"vllm/new.py": "NEW = 3\n"})
    second = open_repository(url, cache)
    assert second == first and [p.name for p in (cache / "repos").iterdir()] == [first.name]
    assert read_snapshot(second, "v3", "o/n").date == UTC_DATES[2]
    assert "vllm/new.py" in paths(read_files(second, "main"))


MALICIOUS = [
    "ext::sh -c touch% {tmp}/pwned",
    "fd::3",
    "-uhack",
    "--upload-pack=touch {tmp}/pwned",
    "ssh://-oProxyCommand=touch%20{tmp}/pwned/repo.git",
]


@pytest.mark.parametrize("repo", MALICIOUS, ids=["ext-helper", "fd-helper", "short-option", "upload-pack", "ssh-option-host"])
def test_malicious_repositories_are_refused_before_anything_runs(tmp_path, monkeypatch, repo):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as caught:
        open_repository(repo.format(tmp=tmp_path), tmp_path / "cache")
    assert "\n" not in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("repo", "expected"),
    [
        ("ftp://example.com/repo.git", "scheme 'ftp' is not allowed"),
        ("ext://sh/x", "scheme 'ext' is not allowed"),
        ("{tmp}/missing", "does not exist"),
        ("{tmp}/plain", "is not a git repository"),
        ("file://{tmp}/missing", "cannot clone"),
        ("http://user:s3cret@127.0.0.1:9/repo.git", "cannot clone http://***@127.0.0.1:9/repo.git"),
        ("", "empty"),
        ("repo\nname", "control characters"),
    ],
    ids=["ftp", "ext-scheme", "missing-path", "not-a-repo", "unreachable-file-url", "credentials-hidden", "empty", "newline"],
)
def test_bad_repositories_raise_one_line(tmp_path, repo, expected):
    (tmp_path / "plain").mkdir()
    with pytest.raises(UserError) as caught:
        open_repository(repo.format(tmp=tmp_path), tmp_path / "cache")
    message = str(caught.value)
    assert expected in message and "\n" not in message and "s3cret" not in message
    assert not (tmp_path / "cache").exists() or list((tmp_path / "cache" / "repos").iterdir()) == []


@pytest.mark.parametrize("ref", ["v9.9.9", "0123456789abcdef", "-uhack", "--output=x", "v1\nv2", ""])
@pytest.mark.parametrize("read", [read_snapshot, read_files], ids=["read_snapshot", "read_files"])
def test_bad_refs_raise_one_line(origin, read, ref):
    with pytest.raises(UserError) as caught:
        read(origin, ref, "o/n") if read is read_snapshot else read(origin, ref)
    assert "\n" not in str(caught.value) and "give a tag, branch or commit id" in str(caught.value)


def test_unknown_ref_message_names_ref_and_repository(origin):
    with pytest.raises(UserError, match=r"^unknown ref 'v9\.9\.9' in o/n: give a tag, branch or commit id$"):
        read_snapshot(origin, "v9.9.9", "o/n")


# -- github_slug ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("repo", "slug"),
    [
        ("https://github.com/vllm-project/vllm", "vllm-project/vllm"),
        ("https://github.com/vllm-project/vllm.git", "vllm-project/vllm"),
        ("https://github.com/vllm-project/vllm/", "vllm-project/vllm"),
        ("git@github.com:vllm-project/vllm.git", "vllm-project/vllm"),
        ("ssh://git@github.com/vllm-project/vllm.git", "vllm-project/vllm"),
        ("https://gitlab.com/vllm-project/vllm", None),
        ("https://github.com/vllm-project/vllm/tree/main", None),
        ("/srv/mirrors/vllm", None),
        ("file:///srv/mirrors/vllm", None),
    ],
    ids=["https", "https-dot-git", "trailing-slash", "scp-ssh", "ssh-url", "other-host", "deeper-path", "local-path", "file-url"],
)
def test_github_slug(repo, slug):
    assert github_slug(repo) == slug
