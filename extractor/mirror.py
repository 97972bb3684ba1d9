"""A release mirror: vLLM's source distributions from the package index, as tagged commits of a local git repository.

For machines that reach the package index pip uses but not GitHub. Each release becomes one commit tagged
v<version>, dated at its upload time, whose message records the upstream commit from vllm/_version.py
(the scanner's permalinks point there). Messages never name the index: its host must not be printed.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import http.client
import json
import os
import posixpath
import re
import ssl
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import git
from packaging.version import InvalidVersion, Version
from tqdm import tqdm

from vllm_errors.model import UserError

_ACCEPT = "application/vnd.pypi.simple.v1+json"
_SDIST = re.compile(r"vllm-(\d+\.\d+\.\d+(?:\.post\d+)?)\.tar\.gz")
_COMMIT_ID = re.compile(r"^(?:__commit_id__|commit_id)\s*=\s*(?:\w+\s*=\s*)*['\"]g?([0-9a-fA-F]{7,40})['\"]", re.M)
_IDENTITY = "vLLM release import <release-import@localhost>"
_VERSION_FILE = "vllm/_version.py"
_INDEX_TIMEOUT = 60
_DOWNLOAD_TIMEOUT = 120
_CHUNK = 1 << 20
# What a dropped connection or a broken download raises; local disk errors are left to surface as themselves.
_NETWORK_ERRORS = (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError)


@dataclass(frozen=True)
class Release:
    version: str
    filename: str  # vllm-<version>.tar.gz
    url: str  # absolute
    sha256: str  # lowercase hex; "" when the index gives none, and then the release is refused
    upload_time: str | None  # ISO 8601 (PEP 700); None when the index does not say
    yanked: bool


def index_url() -> str:
    """The simple-API index pip would use: $PIP_INDEX_URL, else pip's configuration, else pip's default."""
    url = os.environ.get("PIP_INDEX_URL") or _configured_index()
    if not url:
        from pip._internal.models.index import PyPI

        url = PyPI.simple_url
    return url.rstrip("/")


def _configured_index() -> str | None:
    try:
        from pip._internal.configuration import Configuration
        from pip._internal.exceptions import ConfigurationError
    except ImportError:
        raise UserError("pip is not installed here, so its package index is unknown: set PIP_INDEX_URL") from None
    config = Configuration(isolated=False)
    try:
        config.load()
    except ConfigurationError as e:
        raise UserError(f"pip's configuration cannot be read ({e}): fix it, or set PIP_INDEX_URL") from None
    # pip lets the install command's section override the global one.
    for key in ("install.index-url", "global.index-url"):
        try:
            return str(config.get_value(key))
        except ConfigurationError:
            continue
    return None


def available_releases(index: str | None = None) -> dict[str, Release]:
    """vLLM's sdists on the index's PEP 691 JSON page, by version; yanked ones are kept, marked."""
    page = f"{(index or index_url()).rstrip('/')}/vllm/"
    if urllib.parse.urlsplit(page).scheme not in ("http", "https"):
        raise UserError("the package index's address is not an http(s) URL: check PIP_INDEX_URL or pip's index-url")
    request = urllib.request.Request(page, headers={"Accept": _ACCEPT})
    try:
        with urllib.request.urlopen(request, timeout=_INDEX_TIMEOUT) as response:
            if response.headers.get_content_type() != _ACCEPT:
                raise UserError("the package index does not serve the JSON simple API (PEP 691): set PIP_INDEX_URL to one that does")
            page, data = response.url, json.load(response)
    except urllib.error.HTTPError as e:
        e.close()
        raise UserError(f"the package index answered HTTP {e.code} for vllm: check PIP_INDEX_URL, or try again later") from None
    except _NETWORK_ERRORS as e:
        raise UserError(f"cannot reach the package index ({_reason(e)}): check your network, or set PIP_INDEX_URL") from None
    except ValueError:
        raise UserError("the package index sent a malformed vllm page: try again later, or set PIP_INDEX_URL") from None
    releases = {}
    for file in data.get("files", []):
        if match := _SDIST.fullmatch(file.get("filename", "")):
            releases[match.group(1)] = Release(
                version=match.group(1),
                filename=file["filename"],
                url=urllib.parse.urldefrag(urllib.parse.urljoin(page, file["url"])).url,
                sha256=file.get("hashes", {}).get("sha256", "").lower(),
                upload_time=file.get("upload-time"),
                yanked=bool(file.get("yanked", False)),
            )
    return releases


def final_releases(releases: dict[str, Release]) -> list[str]:
    """Versions that are neither yanked nor post-releases, oldest first."""
    return sorted((v for v, r in releases.items() if not r.yanked and not Version(v).is_postrelease), key=Version)


def import_releases(
    dest: Path, versions: list[str], cache_dir: Path, progress: bool | None = None, index: str | None = None
) -> list[str]:
    """Commit each requested release not yet tagged in `dest`, oldest first; return the versions imported.

    A release's parent is the nearest older release already in the mirror, so ascending imports form a chain.
    The index is not contacted when every version is tagged already, so re-runs work offline.
    """
    with _open_mirror(Path(dest)) as repo:
        tagged = _tagged_releases(repo)
        wanted = [v for v in dict.fromkeys(versions) if f"v{v}" not in repo.tags]
        if not wanted:
            return []
        releases = _check_wanted(wanted, available_releases(index))
        imported = []
        for release in sorted(releases, key=lambda r: Version(r.version)):
            started = time.monotonic()
            sdist = _download(release, Path(cache_dir) / "sdist", progress)
            older = [v for v in tagged if v < Version(release.version)]
            parent = tagged[max(older)] if older else None
            commit, upstream = _commit_release(repo, release, sdist, parent)
            tagged[Version(release.version)] = commit
            imported.append(release.version)
            if progress is not False:
                elapsed = time.monotonic() - started
                print(f"v{release.version}: imported (upstream {upstream[:12]}) in {elapsed:.1f}s", file=sys.stderr, flush=True)
        return imported


def _open_mirror(dest: Path) -> git.Repo:
    """The git repository at `dest`, created bare when `dest` is missing or empty: the mirror never needs a checkout."""
    if not dest.exists() or (dest.is_dir() and not any(dest.iterdir())):
        return git.Repo.init(dest, mkdir=True, bare=True)
    try:
        return git.Repo(dest)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UserError(f"{dest} exists but is not a git repository: give an existing mirror, or a new or empty directory") from None


def _tagged_releases(repo: git.Repo) -> dict[Version, str]:
    """Commit ids of the v<version> tags already in the mirror; other tags are none of our business."""
    tagged = {}
    for tag in repo.tags:
        try:
            tagged[Version(tag.name.removeprefix("v"))] = tag.commit.hexsha
        except InvalidVersion:
            continue
    return tagged


def _check_wanted(wanted: list[str], releases: dict[str, Release]) -> list[Release]:
    """All requested releases, or a UserError naming every one that cannot be imported."""
    missing = [v for v in wanted if v not in releases]
    if missing:
        raise UserError(f"no vllm source distribution on the package index for {', '.join(missing)}: check the version numbers")
    yanked = [v for v in wanted if releases[v].yanked]
    if yanked:
        raise UserError(f"vllm {', '.join(yanked)} is yanked on the package index: pick another release")
    unsigned = [v for v in wanted if not releases[v].sha256]
    if unsigned:
        raise UserError(f"the package index gives no sha256 for vllm {', '.join(unsigned)}: use an index that does")
    return [releases[v] for v in wanted]


def _download(release: Release, directory: Path, progress: bool | None) -> Path:
    """The verified sdist in `directory`, downloaded unless a valid copy is there; a half download stays a .part."""
    path = directory / release.filename
    if path.is_file() and _sha256(path) == release.sha256:
        return path
    directory.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    digest = hashlib.sha256()
    try:
        with (
            urllib.request.urlopen(release.url, timeout=_DOWNLOAD_TIMEOUT) as response,
            open(part, "wb") as out,
            tqdm(
                total=int(response.headers.get("Content-Length") or 0) or None,
                desc=release.filename,
                unit="B",
                unit_scale=True,
                unit_divisor=1024,
                leave=False,
                disable=None if progress is None else not progress,
            ) as bar,
        ):
            while chunk := response.read(_CHUNK):
                out.write(chunk)
                digest.update(chunk)
                bar.update(len(chunk))
    except urllib.error.HTTPError as e:
        e.close()
        raise UserError(f"the package index answered HTTP {e.code} for {release.filename}: try again later") from None
    except _NETWORK_ERRORS as e:
        raise UserError(f"downloading {release.filename} failed ({_reason(e)}): check your network and run again") from None
    if digest.hexdigest() != release.sha256:
        part.unlink()
        raise UserError(f"{release.filename} from the package index does not match its sha256: run again, and report it if it persists")
    os.replace(part, path)
    return path


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _reason(error: BaseException) -> str:
    """Why a connection failed, without the host name that str(error) may carry."""
    cause = getattr(error, "reason", error)
    if isinstance(cause, ssl.SSLError):  # its text can quote the certificate's host names
        return f"TLS error {cause.reason or type(cause).__name__}"
    return getattr(cause, "strerror", None) or type(cause).__name__


def _commit_release(repo: git.Repo, release: Release, sdist: Path, parent: str | None) -> tuple[str, str]:
    """Commit the sdist's tree and tag it, in one git fast-import run; return the commit id and upstream commit.

    fast-import stores bytes verbatim (the sdist's .gitignore and .gitattributes must not filter them) and writes
    one pack instead of thousands of loose objects. It moves refs only once the whole stream has arrived, and
    the tag is the last ref, so an interruption never leaves a tag, let alone one on a half commit.
    """
    scratch_ref = f"refs/vllm-release-import/{release.version}"
    with _fast_import(repo) as stream:
        files, version_file = _write_blobs(stream, release, sdist)
        match = _COMMIT_ID.search(version_file.decode("utf-8", "replace"))
        upstream = match.group(1).lower() if match else "unknown"
        when = _git_date(release.upload_time)
        commit_mark = len(files) + 1
        message = f"vLLM {release.version}\n\nupstream-commit: {upstream}\nsource: {release.filename} sha256 {release.sha256}\n"
        stream.write(f"commit {scratch_ref}\nmark :{commit_mark}\nauthor {_IDENTITY} {when}\ncommitter {_IDENTITY} {when}\n".encode())
        _write_data(stream, message.encode())
        if parent:
            stream.write(f"from {parent}\n".encode())
        stream.write(b"deleteall\n")
        for mode, blob_mark, path in files:
            stream.write(b"M %o :%d %s\n" % (mode, blob_mark, _quote(path)))
        stream.write(f"\ntag v{release.version}\nfrom :{commit_mark}\ntagger {_IDENTITY} {when}\n".encode())
        _write_data(stream, f"vLLM {release.version} (upstream {upstream})\n".encode())
        # The scratch ref only exists because fast-import commits onto a ref; deleting it leaves just the tag.
        stream.write(f"reset {scratch_ref}\nfrom {'0' * 40}\n\ndone\n".encode())
    return repo.commit(f"v{release.version}").hexsha, upstream


@contextlib.contextmanager
def _fast_import(repo: git.Repo) -> Iterator[BinaryIO]:
    """The input of a `git fast-import --done`, run when the block ends; if the block raises, nothing is imported.

    Without the closing "done" command fast-import refuses the stream, so closing its input early abandons it.
    """
    process = repo.git.fast_import("--quiet", "--done", istream=subprocess.PIPE, as_process=True)
    stdin = process.proc.stdin
    try:
        yield stdin
        stdin.close()
    except BaseException as error:
        with contextlib.suppress(BrokenPipeError):
            stdin.close()
        if isinstance(error, BrokenPipeError):
            process.wait()  # fast-import stopped reading: raise its own reason
        else:
            process.proc.wait()
        raise
    process.wait()


def _write_blobs(stream: BinaryIO, release: Release, sdist: Path) -> tuple[list[tuple[int, int, str]], bytes]:
    """Send every file of the sdist as a marked blob; return (mode, mark, path) per file and vllm/_version.py's bytes.

    Members pass tarfile's "data" filter, as `extractall(filter="data")` would apply it, but are read from the
    archive rather than unpacked: nothing touches the disk, and a member escaping the archive's root is refused.
    """
    top = f"vllm-{release.version}/"
    files, version_file = [], b""
    # The data filter judges each path against a destination directory: an empty one it may resolve paths in.
    with tempfile.TemporaryDirectory() as root, tarfile.open(sdist, "r:gz") as tar:
        for member in tar:
            try:
                member = tarfile.data_filter(member, root)
            except tarfile.FilterError as e:
                raise UserError(f"{release.filename} holds an unsafe entry ({e}): refusing to import it; report it") from None
            if member.isdir():
                continue
            path = posixpath.normpath(member.name).removeprefix(top)
            if path == posixpath.normpath(member.name) or ".git" in path.lower().split("/"):
                raise UserError(f"{release.filename} holds {member.name!r}, not a file under {top}: refusing to import it; report it")
            if member.issym():
                mode, data = 0o120000, member.linkname.encode("utf-8", "surrogateescape")
            else:
                mode, data = (0o100755 if member.mode & 0o100 else 0o100644), _member_bytes(tar, member)
            if path == _VERSION_FILE:
                version_file = data
            mark = len(files) + 1
            stream.write(b"blob\nmark :%d\n" % mark)
            _write_data(stream, data)
            files.append((mode, mark, path))
    return files, version_file


def _member_bytes(tar: tarfile.TarFile, member: tarfile.TarInfo) -> bytes:
    """A regular file's or hard link's content (the data filter has refused devices and fifos)."""
    extracted = tar.extractfile(member)
    assert extracted is not None, member.name
    with extracted:
        return extracted.read()


def _write_data(stream: BinaryIO, data: bytes) -> None:
    stream.write(b"data %d\n%s\n" % (len(data), data))


def _quote(path: str) -> bytes:
    """`path` as a C-style quoted string, which fast-import accepts for any file name, spaces and newlines included."""
    raw = path.encode("utf-8", "surrogateescape")
    out = bytearray(b'"')
    for byte in raw:
        if byte in b'"\\':
            out += b"\\" + bytes([byte])
        elif byte < 0x20 or byte == 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return bytes(out + b'"')


def _git_date(upload_time: str | None) -> str:
    """fast-import's raw date for an ISO 8601 upload time; now when the index gives none."""
    moment = datetime.datetime.fromisoformat(upload_time) if upload_time else datetime.datetime.now(datetime.timezone.utc)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return f"{int(moment.timestamp())} +0000"
