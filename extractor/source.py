"""Access to the git repository being scanned: opening or caching it, resolving a ref, and reading its Python files."""

from __future__ import annotations

import contextlib
import datetime
import fnmatch
import hashlib
import os
import pathlib
import re
import shutil
import tempfile
import urllib.parse
from collections.abc import Iterator

import git
import gitdb.exc
from packaging.version import Version

from vllm_errors.model import Snapshot, SourceFile, UserError

DEFAULT_INCLUDE = ("vllm/*",)
DEFAULT_EXCLUDE = ("vllm/third_party/*", "vllm/vllm_flash_attn/*")

_SCHEMES = ("https", "http", "ssh", "git", "file")
# An auth prompt would hang a batch run, and git's own protocol allow-list is a second
# fence behind our checks in case a URL rewrite (url.<base>.insteadOf) changes the transport.
_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh"}
_VERSION_FILE = "vllm/_version.py"
_COMMIT_ID = re.compile(r"^(?:__commit_id__|commit_id)\s*=\s*(?:\w+\s*=\s*)*['\"]g?([0-9a-fA-F]{7,40})['\"]", re.M)
_VERSION = re.compile(r"^(?:__version__|version)\s*=\s*(?:\w+\s*=\s*)*['\"]([^'\"\n]+)['\"]", re.M)
_MESSAGE_COMMIT = re.compile(r"^upstream-commit:\s*g?([0-9a-fA-F]{7,40})\s*$", re.M)
_MESSAGE_UNKNOWN = re.compile(r"^upstream-commit:\s*unknown\s*$", re.M)
_MESSAGE_VERSION = re.compile(r"\AvLLM (\d+\.\d+\S*)\s*$", re.M)
_REGULAR_FILE_MODES = (0o100644, 0o100755)
_GITHUB = (
    re.compile(r"^https?://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?$", re.I),
    re.compile(r"^(?:ssh://)?git@github\.com[:/]([\w.-]+)/([\w.-]+?)(?:\.git)?/?$", re.I),
)
# BadName, BadObject and AmbiguousObjectName are all ODBErrors; rev_parse's parser raises the rest on odd input.
_LOOKUP_ERRORS = (gitdb.exc.ODBError, ValueError, IndexError, KeyError, TypeError)


def open_repository(repo: str, cache_dir: pathlib.Path) -> pathlib.Path:
    """Return the path of a local git repository for `repo` (a local path or a URL).

    URLs are cloned once (bare) into cache_dir/"repos"/<sha256(url)[:16]> and fetched (tags too) on later calls.
    """
    if _classify_repo(repo) == "path":
        return _check_local_repository(repo)
    target = pathlib.Path(cache_dir) / "repos" / hashlib.sha256(repo.encode()).hexdigest()[:16]
    if target.exists():
        _fetch(target, repo)
    else:
        _clone(repo, target)
    return target


def read_snapshot(repo_path: pathlib.Path, ref: str, repository: str) -> Snapshot:
    """Resolve `ref` to its full commit id and date, and read the upstream commit and version from vllm/_version.py."""
    with _open_repo(repo_path) as r:
        commit = _resolve(r, ref, repository or str(repo_path))
        date = datetime.datetime.fromtimestamp(commit.committed_date, tz=datetime.timezone.utc).isoformat()
        try:
            text = (commit.tree / _VERSION_FILE).data_stream.read().decode("utf-8", "replace")
        except KeyError:
            text = ""
        # Release mirrors built from source distributions record both in the commit message instead.
        upstream = _COMMIT_ID.search(text) or _MESSAGE_COMMIT.search(commit.message)
        version = _VERSION.search(text) or _MESSAGE_VERSION.search(commit.message)
        linked = upstream.group(1).lower() if upstream else commit.hexsha
        if not upstream and _MESSAGE_UNKNOWN.search(commit.message) and _RELEASE_TAG.match(ref):
            # An old source distribution records no commit, and the mirror's own commit is nowhere upstream:
            # the release's tag names the same tree on GitHub.
            linked = ref
        return Snapshot(
            repository=repository,
            ref=ref,
            commit=commit.hexsha,
            date=date,
            upstream_commit=linked,
            version=version.group(1) if version else None,
        )


def read_files(
    repo_path: pathlib.Path, commit: str, include=DEFAULT_INCLUDE, exclude=DEFAULT_EXCLUDE
) -> tuple[SourceFile, ...]:
    """Every regular `.py` blob of `commit` matching one of `include` and none of `exclude`, sorted by path.

    Patterns are fnmatch patterns, whose * also crosses '/'. Files come from the object database, never a checkout.
    """
    with _open_repo(repo_path) as r:
        tree = _resolve(r, commit, str(repo_path)).tree
        files = [
            SourceFile(path=item.path, blob=item.hexsha, data=item.data_stream.read())
            for item in tree.traverse()
            if item.type == "blob"
            and item.mode in _REGULAR_FILE_MODES
            and item.path.endswith(".py")
            and any(fnmatch.fnmatchcase(item.path, p) for p in include)
            and not any(fnmatch.fnmatchcase(item.path, p) for p in exclude)
        ]
    return tuple(sorted(files, key=lambda f: f.path))


_RELEASE_TAG = re.compile(r"^v(\d+\.\d+\.\d+(?:\.post\d+)?)$")
DEFAULT_RELEASES = 12


def release_tags(repo_path: pathlib.Path) -> list[str]:
    """The repository's release tags (`v0.33.0`, `v0.8.5.post1`; no release candidates), oldest version first."""
    with _open_repo(repo_path) as r:
        names = [t.name for t in r.tags if _RELEASE_TAG.match(t.name)]
    return sorted(names, key=lambda name: Version(name[1:]))


def select_releases(tags: list[str], count: int = DEFAULT_RELEASES, since: str | None = None, until: str | None = None) -> list[str]:
    """The last `count` of `tags` up to `until`, or, with `since`, every one from `since` on (both inclusive).

    `since` may name a release the repository lacks (the package index has no v0.4.0): the range
    then starts at the first release after it.
    """
    if since is not None and since not in tags and _RELEASE_TAG.match(since):
        later = [t for t in tags if Version(t[1:]) > Version(since[1:])]
        since = later[0] if later else since
    for name, tag in (("--since", since), ("--until", until)):
        if tag is not None and tag not in tags:
            near = ", ".join(tags[-3:]) or "none"
            raise UserError(f"{name} {tag}: no such release tag (the newest are {near}); give a tag like v0.28.0")
    if count < 1:
        raise UserError(f"--releases {count}: give 1 or more")
    chosen = tags[: tags.index(until) + 1] if until else list(tags)
    if since:
        chosen = chosen[chosen.index(since) :] if since in chosen else []
        if not chosen:
            raise UserError(f"--since {since} is newer than --until {until}: swap them")
        return chosen
    return chosen[-count:]


def github_slug(repo: str) -> str | None:
    """'https://github.com/vllm-project/vllm(.git)' or 'git@github.com:vllm-project/vllm.git' -> 'vllm-project/vllm'; else None."""
    for pattern in _GITHUB:
        if match := pattern.match(repo.strip()):
            return f"{match.group(1)}/{match.group(2)}"
    return None


def is_url(repo: str) -> bool:
    return _classify_repo(repo) == "url"


def _classify_repo(repo: str) -> str:
    """Reject a dangerous or malformed repository argument, else tell whether it is a "url" or a "path"."""
    if not repo or any(ord(c) < 0x20 or c == "\x7f" for c in repo):
        raise UserError(f"repository {repo!r} is empty or contains control characters: give a local path or a URL")
    if repo.startswith("-"):
        raise UserError(f"repository {repo!r} starts with '-': give a URL, or write a local path as ./{repo}")
    if "::" in repo:
        raise UserError(f"repository {repo!r} names a git remote helper ('::'): give a plain https, ssh, git or file URL")
    if match := re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", repo):
        if match.group(1).lower() not in _SCHEMES:
            raise UserError(f"repository URL scheme {match.group(1)!r} is not allowed: use one of {', '.join(_SCHEMES)}")
        # ssh would read a host (or user) starting with '-' as an option, e.g. -oProxyCommand=...
        if repo[match.end() :].startswith("-"):
            raise UserError(f"repository URL {repo!r} has a host starting with '-': give a real host name")
        return "url"
    # Like git itself, a colon before any slash means scp-like ssh syntax (git@host:owner/name).
    colon, slash = repo.find(":"), repo.find("/")
    return "url" if colon > 0 and (slash < 0 or colon < slash) else "path"


def _check_local_repository(repo: str) -> pathlib.Path:
    path = pathlib.Path(repo).expanduser()
    if not path.exists():
        raise UserError(f"repository path {repo!r} does not exist: give a git repository's path or a URL")
    with _open_repo(path):
        pass
    return path.resolve()


@contextlib.contextmanager
def _open_repo(path: pathlib.Path) -> Iterator[git.Repo]:
    try:
        r = git.Repo(path)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise UserError(f"{str(path)!r} is not a git repository: give a clone's directory or its .git directory") from None
    with r:
        yield r


def _resolve(r: git.Repo, ref: str, where: str) -> git.Commit:
    # A ref reaches git's stdin-driven cat-file process, where a newline would start a second request.
    if not ref or ref.startswith("-") or any(c.isspace() or ord(c) < 0x20 for c in ref):
        raise UserError(f"ref {ref!r} is not a valid ref: give a tag, branch or commit id")
    try:
        return r.commit(ref)
    except _LOOKUP_ERRORS:
        raise UserError(f"unknown ref {ref!r} in {where}: give a tag, branch or commit id") from None


def _clone(url: str, target: pathlib.Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    # Cloning beside the target and renaming on success means an interrupted clone never looks like a cache.
    partial = tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    try:
        git.Repo.clone_from(url, partial, bare=True, env=_GIT_ENV).close()
        os.rename(partial, target)
    except (git.GitCommandError, git.UnsafeProtocolError, git.UnsafeOptionError):
        raise UserError(f"cannot clone {_redact(url)}: check the URL, your network and your access rights") from None
    except OSError:
        if not target.exists():  # otherwise a concurrent run filled the cache first, which is as good
            raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _fetch(target: pathlib.Path, url: str) -> None:
    with _open_repo(target) as r, r.git.custom_environment(**_GIT_ENV):
        try:
            # A bare clone has no fetch refspec, so say where branches and tags go.
            r.remote("origin").fetch(["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"])
        except (git.GitCommandError, git.UnsafeProtocolError, git.UnsafeOptionError, ValueError):
            raise UserError(f"cannot fetch {_redact(url)}: check the URL, your network and your access rights") from None


def _redact(url: str) -> str:
    """`url` without a password or token that may be written into it."""
    parts = urllib.parse.urlsplit(url)
    if parts.password is None and not (parts.username and parts.scheme in ("http", "https")):
        return url
    return parts._replace(netloc="***@" + parts.netloc.rpartition("@")[2]).geturl()
