"""What `explain`, the MCP server and the vLLM plugin read, wherever it comes from: a built site's API, the bundle
the wheel carries, or the published site over HTTP (each file cached, so what was fetched once works offline).

The bundle is the site's lookup index as it is and each error's record cut to what an answer prints
(`compact`), both gzipped: `vllm-errors bundle` writes it from a built site into extractor/bundle/, and the
wheel carries it."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable

from .model import UserError
from .resources import BUNDLE_DIR, IN_CHECKOUT, WORK_DIR

INDEX = "lookup.json.gz"
RECORDS = "records.json.gz"
RELEASES = "releases.json.gz"
# The published site: where a link printed by the bundle, the plugin or the MCP server points.
DEFAULT_SITE_URL = "https://vllm-errors.github.io/vllm-errors/"
SITE_URL_ENV = "VLLM_ERRORS_SITE_URL"
TIMEOUT = 20  # seconds for one file of the published site


def site_url() -> str:
    """The published site's base URL, ending in a slash ($VLLM_ERRORS_SITE_URL, else the project's own)."""
    url = os.environ.get(SITE_URL_ENV, "").strip() or DEFAULT_SITE_URL
    return url if url.endswith("/") else url + "/"


def compact(record: dict) -> dict:
    """The parts of an error's API record an answer prints: title, where it is raised, its status in the
    history, the explanation and the wrapper's root causes."""
    a = record["annotation"]
    history = record.get("history")
    return {
        "title": record["title"],
        "url": record["url"],
        "exception": record["exception"],
        "ref": record["snapshot"]["ref"],
        "sites": [{k: s[k] for k in ("path", "line", "function")} for s in record["sites"][:3]],
        "more_sites": max(0, len(record["sites"]) - 3),
        "history": {k: history[k] for k in ("status", "removed_in", "superseded_by")} | {"last": history["releases"][-1]["ref"]}
        if history else None,
        "annotation": {k: a.get(k) for k in ("kind", "meaning", "triggers", "solutions", "example_fix")},
        "reports": len(record.get("reports") or ()),
    }


def compact_releases(data: dict) -> list[dict]:
    """The release notes of the API (api/releases.json) cut to what `release_notes` says: each release's count of
    errors and the ids it added, removed and reworded."""
    keep = ("ref", "previous", "date", "errors", "added", "removed", "reworded")
    return [{k: notes.get(k) for k in keep} for notes in data.get("notes", [])]


def _gzip_json(data) -> bytes:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return gzip.compress(text.encode("utf-8"), mtime=0)  # no timestamp: the same site gives the same bytes


def write_bundle(site_dir: Path, out_dir: Path = BUNDLE_DIR) -> dict[str, int]:
    """Write the bundle of a built site; returns each file's size in bytes."""
    api = site_dir / "api"
    index_file = api / "lookup.json"
    if not index_file.is_file():
        raise UserError(f"no lookup index in {site_dir}: build the site first ('vllm-errors build' or 'make site'), or give --site")
    index = json.loads(index_file.read_text(encoding="utf-8"))
    records = {}
    for entry in index["errors"]:
        path = api / "errors" / f"{entry['i']}.json"
        records[entry["i"]] = compact(json.loads(path.read_text(encoding="utf-8")))
    releases_file = api / "releases.json"
    releases = compact_releases(json.loads(releases_file.read_text(encoding="utf-8"))) if releases_file.is_file() else []
    out_dir.mkdir(parents=True, exist_ok=True)
    sizes = {}
    for name, data in ((INDEX, index), (RECORDS, records), (RELEASES, releases)):
        blob = _gzip_json(data)
        (out_dir / name).write_bytes(blob)
        sizes[name] = len(blob)
    return sizes


@dataclass(frozen=True)
class Site:
    """Where answers come from: the lookup index, an error's record (compact form) and the link to its page."""

    name: str  # said in messages: a folder, "the bundled index" or a URL
    index: dict
    record: Callable[[str], dict]
    link: Callable[[str], str]  # a page's path under the site ("errors/<id>.html") -> where to open it
    releases: Callable[[], list[dict]] = list  # compact_releases of the site, oldest first

    def page(self, error_id: str) -> str:
        return self.link(f"errors/{error_id}.html")


def _checked(index: dict, name: str) -> dict:
    from .lookup import INDEX_FORMAT

    if index.get("format") != INDEX_FORMAT:
        raise UserError(f"the lookup index of {name} is of another version of vllm-errors: build the site again, or upgrade vllm-errors")
    return index


def local_site(site_dir: Path) -> Site:
    """A site built on this machine: its API files, and links to its pages as paths."""
    index_file = site_dir / "api" / "lookup.json"
    if not index_file.is_file():
        raise UserError(f"no lookup index in {site_dir}: run 'vllm-errors build' first, or give --site")
    index = _checked(json.loads(index_file.read_text(encoding="utf-8")), str(site_dir))

    def record(error_id: str) -> dict:
        return compact(json.loads((site_dir / "api" / "errors" / f"{error_id}.json").read_text(encoding="utf-8")))

    def releases() -> list[dict]:
        path = site_dir / "api" / "releases.json"
        return compact_releases(json.loads(path.read_text(encoding="utf-8"))) if path.is_file() else []

    return Site(str(site_dir), index, record, lambda rel: str(site_dir / rel), releases)


BUNDLE_ENV = "VLLM_ERRORS_BUNDLE"  # another bundle's folder than the one this install carries


def bundled_site(bundle_dir: Path | None = None) -> Site | None:
    """The bundle the wheel carries (or $VLLM_ERRORS_BUNDLE's), with links to the published site; None when
    there is none."""
    bundle_dir = bundle_dir or Path(os.environ.get(BUNDLE_ENV) or BUNDLE_DIR)
    if not (bundle_dir / INDEX).is_file():
        return None
    index = _checked(json.loads(gzip.decompress((bundle_dir / INDEX).read_bytes())), "the bundled index")
    records = lru_cache(maxsize=1)(lambda: json.loads(gzip.decompress((bundle_dir / RECORDS).read_bytes())))
    releases = lru_cache(maxsize=1)(lambda: json.loads(gzip.decompress((bundle_dir / RELEASES).read_bytes()))
                                    if (bundle_dir / RELEASES).is_file() else [])
    base = site_url()
    return Site("the bundled index", index, lambda error_id: records()[error_id], lambda rel: base + rel, releases)


def _cache_dir() -> Path:
    root = os.environ.get("VLLM_ERRORS_CACHE") or os.path.join(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache", "vllm-errors")
    return Path(root) / "sites"


def _fetch(url: str, cache: Path) -> bytes:
    """One file of a published site. A cached copy is sent as its Last-Modified date, so an unchanged file costs a
    304 and no body (the lookup index is megabytes); when the network fails, the cached copy answers."""
    stamp = cache.with_name(cache.name + ".last-modified")
    request = urllib.request.Request(url)
    if cache.is_file() and stamp.is_file():
        request.add_header("If-Modified-Since", stamp.read_text(encoding="utf-8").strip())
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:  # noqa: S310 (the user names the site)
            data = response.read()
            modified = response.headers.get("Last-Modified")
    except urllib.error.HTTPError as e:  # 304 Not Modified, or an error the cached copy answers for
        if cache.is_file():
            return cache.read_bytes()
        raise UserError(f"cannot read {url}: HTTP {e.code}; check --site, or give it a site built on this machine") from None
    except (urllib.error.URLError, TimeoutError, OSError) as e:
        if cache.is_file():
            return cache.read_bytes()
        reason = getattr(e, "reason", None) or e
        raise UserError(f"cannot read {url}: {reason}; check the network, or give --site a site built on this machine") from None
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(data)
    if modified:
        stamp.write_text(modified, encoding="utf-8")
    return data


def remote_site(url: str) -> Site:
    """A published site: its API over HTTP, every file cached under ~/.cache/vllm-errors/sites/."""
    base = url if url.endswith("/") else url + "/"
    cache = _cache_dir() / hashlib.sha256(base.encode()).hexdigest()[:16]
    index = _checked(json.loads(_fetch(base + "api/lookup.json", cache / "lookup.json")), base)

    def record(error_id: str) -> dict:
        return compact(json.loads(_fetch(f"{base}api/errors/{error_id}.json", cache / "errors" / f"{error_id}.json")))

    def releases() -> list[dict]:
        return compact_releases(json.loads(_fetch(base + "api/releases.json", cache / "releases.json")))

    return Site(base, index, record, lambda rel: base + rel, releases)


def open_site(where: str | Path | None) -> Site:
    """--site: a URL or a built site's folder; without it, the checkout's last build, else the bundle, else the
    published site."""
    if where is not None:
        text = str(where)
        return remote_site(text) if text.startswith(("http://", "https://")) else local_site(Path(text))
    last_build = WORK_DIR / "build" / "site"
    if IN_CHECKOUT and (last_build / "api" / "lookup.json").is_file():
        return local_site(last_build)
    return bundled_site() or remote_site(site_url())


def covered(index: dict) -> str:
    """The vLLM releases an index covers, as said to a user: "0.4.1 to 0.34.0"."""
    releases = index.get("releases") or [index.get("release", "?")]
    return f"{releases[0]} to {releases[-1]}" if len(releases) > 1 else str(releases[0])
