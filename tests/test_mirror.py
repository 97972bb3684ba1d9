"""Tests of vllm_errors.mirror against small fake sdists served by a local PEP 691 index: no network."""

from __future__ import annotations

import datetime
import hashlib
import io
import json
import socket
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import git
import pytest

from vllm_errors import mirror
from vllm_errors.mirror import Release, available_releases, final_releases, import_releases, index_url
from vllm_errors.model import UserError
from vllm_errors.source import read_snapshot

COMMITS = {"0.2.0": "abc1234def5678", "0.3.0": "0123456789abcdef0123456789abcdef01234567", "0.4.0": "fedcba9876"}
UPLOADED = {"0.2.0": "2024-01-02T03:04:05.123456Z", "0.3.0": "2024-02-03T04:05:06Z", "0.4.0": "2024-03-04T05:06:07Z"}


def sdist(version: str, commit: str | None, extra: dict[str, bytes] | None = None) -> bytes:
    """A gzipped tar shaped like vLLM's sdists; its .gitignore names _version.py, as vLLM's does."""
    top = f"vllm-{version}"
    commit_line = f"__commit_id__ = commit_id = 'g{commit}'\n" if commit else "__commit_id__ = commit_id = None\n"
    files = {
        f"{top}/PKG-INFO": f"Metadata-Version: 2.4\nName: vllm\nVersion: {version}\n".encode(),
        f"{top}/.gitignore": b"/vllm/_version.py\n",
        f"{top}/vllm/__init__.py": b"",
        f"{top}/vllm/_version.py": f"__version__ = version = '{version}'\n{commit_line}".encode(),
        f"{top}/vllm/engine.py": b"def run():\n    raise ValueError('no engine')\n",
        f"{top}/tools/run.sh": b"#!/bin/sh\necho run\n",
        **(extra or {}),
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if name.endswith(".sh") else 0o644
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo(f"{top}/README")
        link.type, link.linkname = tarfile.SYMTYPE, "PKG-INFO"
        tar.addfile(link)
    return out.getvalue()


class Index(ThreadingHTTPServer):
    """A simple-API index for vllm at /simple/, with files under /files/ linked by relative URLs."""

    daemon_threads = False  # server_close joins the handler threads: no thread outlives a test

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), IndexHandler)
        self.url = f"http://127.0.0.1:{self.server_address[1]}/simple"
        self.files: dict[str, bytes] = {}
        self.entries: list[dict] = []
        self.requests: list[str] = []

    def add(self, filename: str, data: bytes, upload_time: str | None = None, yanked: bool | str = False, sha256: str | None = None) -> None:
        self.files[filename] = data
        entry = {"filename": filename, "url": f"../../files/{filename}#sha256=x", "yanked": yanked,
                 "hashes": {"sha256": sha256 or hashlib.sha256(data).hexdigest()}}
        if upload_time:
            entry["upload-time"] = upload_time
        self.entries.append(entry)

    def downloads(self) -> int:
        return sum(path.startswith("/files/") for path in self.requests)


class IndexHandler(BaseHTTPRequestHandler):
    server: Index

    def do_GET(self) -> None:
        self.server.requests.append(self.path)
        if self.path == "/simple/vllm/" and "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", ""):
            body, kind = json.dumps({"meta": {"api-version": "1.1"}, "name": "vllm", "files": self.server.entries}).encode(), "application/vnd.pypi.simple.v1+json"
        elif self.path.startswith("/files/") and self.path[7:] in self.server.files:
            body, kind = self.server.files[self.path[7:]], "application/octet-stream"
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "PIP_INDEX_URL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def index() -> Iterator[Index]:
    srv = Index()
    for version, commit in COMMITS.items():
        srv.add(f"vllm-{version}.tar.gz", sdist(version, commit), UPLOADED[version])
    srv.add("vllm-0.2.1.tar.gz", sdist("0.2.1", "1111111"), yanked="broken")
    srv.add("vllm-0.3.0.post1.tar.gz", sdist("0.3.0.post1", "2222222"))
    srv.add("vllm-0.3.0-py3-none-any.whl", b"wheel")
    srv.add("vllm-0.3.0.1.tar.gz", sdist("0.3.0.1", "3333333"))
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()
    thread.join()


def tag_commit(repo: git.Repo, version: str) -> git.Commit:
    return repo.tags[f"v{version}"].commit


def test_available_releases_reads_sdists_only_and_resolves_urls(index):
    releases = available_releases(index.url + "/")
    assert sorted(releases) == ["0.2.0", "0.2.1", "0.3.0", "0.3.0.post1", "0.4.0"]
    release = releases["0.2.0"]
    assert release.url == index.url.removesuffix("/simple") + "/files/vllm-0.2.0.tar.gz"
    assert release.sha256 == hashlib.sha256(index.files["vllm-0.2.0.tar.gz"]).hexdigest()
    assert release.upload_time == UPLOADED["0.2.0"]
    assert releases["0.2.1"].yanked and not release.yanked
    assert releases["0.3.0.post1"].upload_time is None


def test_final_releases_drops_yanked_and_post_and_sorts_by_version():
    def release(version: str, yanked: bool = False) -> Release:
        return Release(version, f"vllm-{version}.tar.gz", "https://index.invalid/x", "0" * 64, None, yanked)

    releases = {v: release(v) for v in ("0.10.0", "0.9.2", "0.9.2.post1", "0.2.0")} | {"0.2.1": release("0.2.1", True)}
    assert final_releases(releases) == ["0.2.0", "0.9.2", "0.10.0"]


def test_index_url_prefers_the_environment(monkeypatch):
    monkeypatch.setenv("PIP_INDEX_URL", "https://packages.example/simple/")
    assert index_url() == "https://packages.example/simple"


def test_index_url_reads_pips_configuration(monkeypatch, tmp_path):
    config = tmp_path / "pip.conf"
    config.write_text("[global]\nindex-url = https://global.example/simple/\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(config))
    assert index_url() == "https://global.example/simple"
    config.write_text("[global]\nindex-url = https://global.example/simple\n[install]\nindex-url = https://install.example/simple\n")
    assert index_url() == "https://install.example/simple"


def test_index_url_defaults_to_pips_default(monkeypatch, tmp_path):
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")  # pip then reads no configuration file
    from pip._internal.models.index import PyPI

    assert index_url() == PyPI.simple_url.rstrip("/")


def test_pip_index_url_is_used_when_no_index_is_given(index, monkeypatch, tmp_path):
    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    assert "0.4.0" in available_releases()
    assert import_releases(tmp_path / "mirror", ["0.2.0"], tmp_path / "cache", progress=False) == ["0.2.0"]


def test_import_commits_each_release_tagged_and_chained(index, tmp_path, capsys):
    dest = tmp_path / "mirror"
    imported = import_releases(dest, ["0.3.0", "0.2.0"], tmp_path / "cache", index=index.url)
    assert imported == ["0.2.0", "0.3.0"]  # oldest first, whatever the order asked
    with git.Repo(dest) as repo:
        assert sorted(t.name for t in repo.tags) == ["v0.2.0", "v0.3.0"]
        assert repo.git.for_each_ref("--format=%(refname)").split() == ["refs/tags/v0.2.0", "refs/tags/v0.3.0"]
        old, new = tag_commit(repo, "0.2.0"), tag_commit(repo, "0.3.0")
        assert old.parents == () and new.parents == (old,)
        sha = hashlib.sha256(index.files["vllm-0.2.0.tar.gz"]).hexdigest()
        assert old.message == f"vLLM 0.2.0\n\nupstream-commit: abc1234def5678\nsource: vllm-0.2.0.tar.gz sha256 {sha}\n"
        assert new.message.splitlines()[2] == f"upstream-commit: {COMMITS['0.3.0']}"
        assert repo.tags["v0.2.0"].tag is not None  # annotated
        assert repo.tags["v0.2.0"].tag.message == "vLLM 0.2.0 (upstream abc1234def5678)"
        for person in (old.author, old.committer):
            assert person.name == "vLLM release import"
        upload = datetime.datetime.fromisoformat(UPLOADED["0.2.0"])
        assert old.authored_date == old.committed_date == int(upload.timestamp())
        files = {item.path: item for item in old.tree.traverse() if item.type == "blob"}
        assert sorted(files) == [".gitignore", "PKG-INFO", "README", "tools/run.sh", "vllm/__init__.py", "vllm/_version.py", "vllm/engine.py"]
        assert files["vllm/engine.py"].data_stream.read() == b"def run():\n    raise ValueError('no engine')\n"
        assert files["vllm/_version.py"].data_stream.read().startswith(b"__version__ = version = '0.2.0'")
        assert (files["tools/run.sh"].mode, files["vllm/engine.py"].mode, files["README"].mode) == (0o100755, 0o100644, 0o120000)
        assert files["README"].data_stream.read() == b"PKG-INFO"
    snapshot = read_snapshot(dest, "v0.2.0", "vllm-project/vllm")
    assert (snapshot.upstream_commit, snapshot.version, snapshot.commit) == ("abc1234def5678", "0.2.0", old.hexsha)
    err = capsys.readouterr().err
    assert "v0.2.0: imported (upstream abc1234def56)" in err and "v0.3.0: imported (upstream 0123456789ab)" in err
    assert "127.0.0.1" not in err


def test_reimport_is_a_no_op_and_downloads_are_cached(index, tmp_path):
    cache = tmp_path / "cache"
    import_releases(tmp_path / "a", ["0.2.0", "0.3.0"], cache, progress=False, index=index.url)
    assert index.downloads() == 2
    requests = len(index.requests)
    assert import_releases(tmp_path / "a", ["0.2.0", "0.3.0"], cache, progress=False, index=index.url) == []
    assert len(index.requests) == requests  # nothing to import: the index is not asked
    assert import_releases(tmp_path / "b", ["0.2.0", "0.3.0"], cache, progress=False, index=index.url) == ["0.2.0", "0.3.0"]
    assert index.downloads() == 2  # a second mirror reuses the cached sdists
    (cache / "sdist" / "vllm-0.2.0.tar.gz").write_bytes(b"truncated")
    assert import_releases(tmp_path / "c", ["0.2.0"], cache, progress=False, index=index.url) == ["0.2.0"]
    assert index.downloads() == 3  # a damaged cached copy is fetched again
    assert sorted(p.name for p in (cache / "sdist").iterdir()) == ["vllm-0.2.0.tar.gz", "vllm-0.3.0.tar.gz"]
    with git.Repo(tmp_path / "a") as a, git.Repo(tmp_path / "b") as b:
        assert tag_commit(a, "0.3.0") == tag_commit(b, "0.3.0")  # imports are reproducible


def test_older_releases_can_come_later(index, tmp_path):
    dest, cache = tmp_path / "mirror", tmp_path / "cache"
    import_releases(dest, ["0.4.0"], cache, progress=False, index=index.url)
    import_releases(dest, ["0.2.0"], cache, progress=False, index=index.url)
    import_releases(dest, ["0.3.0"], cache, progress=False, index=index.url)
    with git.Repo(dest) as repo:
        assert tag_commit(repo, "0.2.0").parents == ()  # older than everything there
        assert tag_commit(repo, "0.3.0").parents == (tag_commit(repo, "0.2.0"),)  # the nearest older one
        assert tag_commit(repo, "0.4.0").parents == ()  # commits already made are never rewritten
    assert read_snapshot(dest, "v0.3.0", "vllm-project/vllm").version == "0.3.0"


def test_sha256_mismatch_is_refused_and_leaves_nothing(index, tmp_path):
    index.entries[0]["hashes"]["sha256"] = "0" * 64
    with pytest.raises(UserError, match="does not match its sha256") as caught:
        import_releases(tmp_path / "mirror", ["0.2.0"], tmp_path / "cache", progress=False, index=index.url)
    assert "127.0.0.1" not in str(caught.value)
    with git.Repo(tmp_path / "mirror") as repo:
        assert repo.tags == []
    assert list((tmp_path / "cache" / "sdist").iterdir()) == []


def test_unknown_version_is_refused_without_naming_the_index(index, tmp_path):
    with pytest.raises(UserError) as caught:
        import_releases(tmp_path / "mirror", ["0.2.0", "9.9.9"], tmp_path / "cache", progress=False, index=index.url)
    message = str(caught.value)
    assert "9.9.9" in message and "package index" in message and "\n" not in message
    assert "127.0.0.1" not in message
    assert index.downloads() == 0  # refused before anything was fetched


@pytest.mark.parametrize("version", ["0.2.1", "0.3.0-py3-none-any", "0.3.0.1"])
def test_yanked_wheel_and_odd_versions_are_refused(index, tmp_path, version):
    with pytest.raises(UserError, match="yanked" if version == "0.2.1" else "no vllm source distribution"):
        import_releases(tmp_path / "mirror", [version], tmp_path / "cache", progress=False, index=index.url)


def test_unreachable_index_is_a_user_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/simple"
    for call in (lambda: available_releases(url), lambda: import_releases(tmp_path / "m", ["0.2.0"], tmp_path / "c", index=url)):
        with pytest.raises(UserError, match="cannot reach the package index") as caught:
            call()
        assert "127.0.0.1" not in str(caught.value) and str(port) not in str(caught.value)


def test_an_index_address_that_is_not_http_is_a_user_error():
    with pytest.raises(UserError, match="not an http"):
        available_releases("packages.example/simple")


def test_an_index_without_vllm_is_a_user_error(index):
    with pytest.raises(UserError, match="HTTP 404") as caught:
        available_releases(index.url.removesuffix("/simple") + "/elsewhere")
    assert "127.0.0.1" not in str(caught.value)


def test_dest_that_is_not_a_repository_is_refused(index, tmp_path):
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="not a git repository"):
        import_releases(tmp_path / "mirror", ["0.2.0"], tmp_path / "cache", progress=False, index=index.url)
    assert index.requests == []


def test_missing_commit_id_is_recorded_as_unknown_and_links_go_to_the_tag(index, tmp_path):
    index.add("vllm-0.5.0.tar.gz", sdist("0.5.0", None))
    import_releases(tmp_path / "mirror", ["0.5.0"], tmp_path / "cache", progress=False, index=index.url)
    with git.Repo(tmp_path / "mirror") as repo:
        assert "\nupstream-commit: unknown\n" in tag_commit(repo, "0.5.0").message
    from vllm_errors.source import read_snapshot

    snapshot = read_snapshot(tmp_path / "mirror", "v0.5.0", "vllm-project/vllm")
    assert snapshot.upstream_commit == "v0.5.0", "the mirror's own commit is nowhere on GitHub; the tag is"


@pytest.mark.parametrize(
    "name", ["../escape.py", "vllm-0.5.0/../escape.py", "stray.py", "vllm-0.5.0/vllm/.git/config", "/etc/passwd"]
)
def test_unsafe_sdist_member_is_refused(index, tmp_path, name):
    index.add("vllm-0.5.0.tar.gz", sdist("0.5.0", "abcdef1", {name: b"x = 1\n"}))
    with pytest.raises(UserError, match="refusing to import it"):
        import_releases(tmp_path / "mirror", ["0.5.0"], tmp_path / "cache", progress=False, index=index.url)
    with git.Repo(tmp_path / "mirror") as repo:
        assert repo.git.for_each_ref() == ""


def test_interrupted_import_leaves_no_ref_and_can_be_rerun(index, tmp_path, monkeypatch):
    write_data = mirror._write_data

    def interrupt_after_the_commit_message(stream, data):
        write_data(stream, data)
        if data.startswith(b"vLLM 0.2.0\n"):  # the stream so far is a valid commit, with no files yet
            raise KeyboardInterrupt

    monkeypatch.setattr(mirror, "_write_data", interrupt_after_the_commit_message)
    with pytest.raises(KeyboardInterrupt):
        import_releases(tmp_path / "mirror", ["0.2.0"], tmp_path / "cache", progress=False, index=index.url)
    with git.Repo(tmp_path / "mirror") as repo:
        assert repo.git.for_each_ref() == ""  # not even the scratch ref
    monkeypatch.setattr(mirror, "_write_data", write_data)
    assert import_releases(tmp_path / "mirror", ["0.2.0"], tmp_path / "cache", progress=False, index=index.url) == ["0.2.0"]


def test_mirror_command_imports_and_says_what_it_did(index, tmp_path, monkeypatch, capsys):
    from vllm_errors.cli import main

    monkeypatch.setenv("PIP_INDEX_URL", index.url)
    dest = tmp_path / "mirror"
    assert main(["mirror", str(dest), "--latest", "2", "--cache-dir", str(tmp_path / "c"), "--no-progress"]) == 0
    assert "2 imported, 0 there already; tags v0.3.0, v0.4.0" in capsys.readouterr().out
    assert read_snapshot(dest, "v0.4.0", "vllm-project/vllm").upstream_commit == COMMITS["0.4.0"]
    assert main(["mirror", str(dest), "0.3.0", "--latest", "1"]) == 2
    assert "not both" in capsys.readouterr().err
