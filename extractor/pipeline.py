"""The one data flow: pinned commit → source files → scans (cached, in parallel) → catalog → files on disk."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from tqdm import tqdm

from . import source
from .cache import ScanCache, scan_key
from .catalog import build_catalog
from .model import (
    Catalog,
    ModuleScan,
    ScanStats,
    SourceFile,
    UserError,
    catalog_to_json,
    module_scan_from_json,
    module_scan_to_json,
)
from .scanner import scan_module


@dataclass(frozen=True)
class ScanRequest:
    repo: str  # local path or URL
    ref: str
    cache_dir: Path
    repository: str = "vllm-project/vllm"  # GitHub slug for ids and permalinks
    include: tuple[str, ...] = source.DEFAULT_INCLUDE
    exclude: tuple[str, ...] = source.DEFAULT_EXCLUDE
    jobs: int = 0  # 0: one process per core
    progress: bool | None = None  # None: a bar only on a terminal


def default_cache_dir() -> Path:
    env = os.environ.get("VLLM_ERRORS_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "vllm-errors"


def _scan_to_json(path: str, data: bytes) -> bytes:
    return module_scan_to_json(scan_module(path, data))


def scan_files(
    files: Sequence[SourceFile], cache: ScanCache, jobs: int = 0, progress: bool | None = None
) -> tuple[list[ModuleScan], int]:
    """Each file's scan, from the cache where its blob was scanned before; returns (scans, cached count)."""
    keys = [scan_key(f.path, f.blob) for f in files]
    stored = cache.get_many(keys)
    missing = [(k, f) for k, f in zip(keys, files) if k not in stored]
    jobs = jobs or os.cpu_count() or 1
    bar = tqdm(total=len(missing), unit="file", desc="scanning", disable=None if progress is None else not progress)
    try:
        if jobs > 1 and len(missing) > 8:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                results = pool.map(_scan_to_json, [f.path for _, f in missing], [f.data for _, f in missing], chunksize=4)
                for (key, _), value in zip(missing, results):
                    _store(cache, stored, key, value, bar)
        else:
            for key, f in missing:
                _store(cache, stored, key, _scan_to_json(f.path, f.data), bar)
    finally:
        bar.close()
        cache.commit()
    return [module_scan_from_json(stored[k]) for k in keys], len(files) - len(missing)


def _store(cache: ScanCache, stored: dict[str, bytes], key: str, value: bytes, bar: tqdm) -> None:
    cache.put(key, value)
    stored[key] = value
    bar.update(1)
    if bar.n % 200 == 0:
        cache.commit()  # an interrupted scan resumes from here


def scan_release(request: ScanRequest) -> tuple[Catalog, ScanStats]:
    started = time.perf_counter()
    repo_path = source.open_repository(request.repo, request.cache_dir)
    snapshot = source.read_snapshot(repo_path, request.ref, request.repository)
    files = source.read_files(repo_path, snapshot.commit, request.include, request.exclude)
    if not files:
        raise UserError(
            f"no Python files match {', '.join(request.include)} at {request.ref}: check --include and --exclude"
        )
    with ScanCache(request.cache_dir) as cache:
        scans, cached = scan_files(files, cache, request.jobs, request.progress)
    catalog = build_catalog(snapshot, scans, len(files))
    stats = ScanStats(
        files=len(files),
        cached=cached,
        sites=sum(len(e.sites) for e in catalog.errors),
        errors=len(catalog.errors),
        problems=len(catalog.problems),
        seconds=round(time.perf_counter() - started, 2),
    )
    return catalog, stats


_UMASK = os.umask(0)
os.umask(_UMASK)


def write_text(path: Path, text: str) -> None:
    """Write a file atomically: a reader sees the old content or the new, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes files private; outputs are ordinary files
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_catalog(catalog: Catalog, path: Path) -> None:
    write_text(path, catalog_to_json(catalog))


def summary_line(catalog: Catalog, stats: ScanStats) -> str:
    snap = catalog.snapshot
    return (
        f"{snap.ref} ({snap.commit[:12]}): {stats.files} files ({stats.cached} cached), "
        f"{stats.sites} sites, {stats.errors} errors, {stats.problems} problems, {stats.seconds:.1f} s"
    )


def print_problems(catalog: Catalog) -> None:
    for problem in catalog.problems:
        print(f"problem: {problem.path}: {problem.kind}: {problem.detail}", file=sys.stderr)
