"""The one data flow: pinned commit → source files → scans (cached, in parallel) → catalog → files on disk."""

from __future__ import annotations

import logging
import os
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None

from mkdocs.commands.build import build as mkdocs_build
from mkdocs.config import load_config
from mkdocs.exceptions import MkDocsException
from tqdm import tqdm

from . import facts, source
from .api import render_api
from .outside import load_outside, resolve_outside
from .cache import ScanCache, scan_key
from . import mkdocs_hooks
from .mkdocs_hooks import NAV_JSON
from .resources import DATA_DIR, WORK_DIR
from .search import OUTPUT as SEARCH_DIR, index_site
from .catalog import build_catalog, resolve_factories
from .annotate import derived_annotator
from .knowledge import build_knowledge_base
from .program import Program
from .reports import along_lineage, load_reports
from .notes import Note, NotesReport, check_notes, curated_annotator, follow_rewordings, parse_glossary, parse_note, read_annotation
from .model import (
    Catalog,
    GlossaryTerm,
    History,
    KnowledgeBase,
    ModuleScan,
    ScanStats,
    Snapshot,
    SourceFile,
    UserError,
    catalog_to_json,
    module_scan_from_json,
    module_scan_to_json,
)
from .scanner import scan_by_definition, source_tree

if TYPE_CHECKING:
    from .llm import LlmConfig


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


_READERS: dict[Path, ScanCache] = {}


def _scan(path: str, blob: str, data: bytes, cache: ScanCache) -> tuple[bytes, dict[str, bytes]]:
    """One file's scan as JSON, and what else to store: the definitions' scans, and the file's whole-program
    facts, read from the tree the scan parsed."""
    scan, new = scan_by_definition(path, data, cache.get_many)
    parsed = source_tree(data)
    if parsed is not None:
        new.update(facts.stored_facts(path, blob, facts.tree_facts(path, *parsed)))
    return module_scan_to_json(scan), new


def _scan_in_worker(path: str, blob: str, data: bytes, cache_dir: Path) -> tuple[bytes, dict[str, bytes]]:
    if cache_dir not in _READERS:
        _READERS[cache_dir] = ScanCache(cache_dir, readonly=True)
    return _scan(path, blob, data, _READERS[cache_dir])


def scan_files(
    files: Sequence[SourceFile], cache: ScanCache, jobs: int = 0, progress: bool | None = None
) -> tuple[list[ModuleScan], int]:
    """Each file's scan, from the cache where its blob was scanned before; returns (scans, cached count).

    A file whose blob is new is scanned definition by definition, reusing what earlier
    releases' scans stored (`scanner.scan_by_definition`).
    """
    keys = [scan_key(f.path, f.blob) for f in files]
    stored = cache.get_many(keys)
    missing = [(k, f) for k, f in zip(keys, files) if k not in stored]
    jobs = jobs or os.cpu_count() or 1
    bar = tqdm(total=len(missing), unit="file", desc="scanning", disable=None if progress is None else not progress)
    try:
        if jobs > 1 and len(missing) > 8:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                paths, blobs, data = [f.path for _, f in missing], [f.blob for _, f in missing], [f.data for _, f in missing]
                results = pool.map(_scan_in_worker, paths, blobs, data, [cache.directory] * len(missing), chunksize=4)
                for (key, _), result in zip(missing, results):
                    _store(cache, stored, key, result, bar)
        else:
            for key, f in missing:
                _store(cache, stored, key, _scan(f.path, f.blob, f.data, cache), bar)
    finally:
        bar.close()
        cache.commit()
    return [module_scan_from_json(stored[k]) for k in keys], len(files) - len(missing)


def _store(cache: ScanCache, stored: dict[str, bytes], key: str, result: tuple[bytes, dict[str, bytes]], bar: tqdm) -> None:
    value, definitions = result
    cache.put_many(definitions)
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
        asserts, program = facts.release_facts(files, cache)
    catalog = replace(build_catalog(snapshot, scans, len(files)), bare_asserts=asserts, program=Program(program))
    stats = ScanStats(
        files=len(files),
        cached=cached,
        sites=sum(len(e.sites) for e in catalog.errors),
        errors=len(catalog.errors),
        problems=len(catalog.problems),
        seconds=round(time.perf_counter() - started, 2),
    )
    return catalog, stats


@dataclass(frozen=True)
class ReleasesRequest:
    """Which releases `update` covers, and where their code comes from."""

    scan: ScanRequest  # its repo is a git repository or URL of vLLM; its ref is unused
    origin: str = "auto"  # "git": the repository's tags; "index": the package index's sdists; "auto": git, else the index
    count: int = source.DEFAULT_RELEASES
    since: str | None = None
    until: str | None = None


def release_repository(request: ReleasesRequest) -> tuple[Path, list[str]]:
    """A local repository holding the releases, and their tags, oldest first."""
    if request.origin == "index":
        return _index_mirror(request)
    try:
        path = source.open_repository(request.scan.repo, request.scan.cache_dir)
    except UserError as e:
        if request.origin != "auto" or not source.is_url(request.scan.repo):  # a bad local path is the user's to fix
            raise
        print(f"{e}; importing the releases from the package index instead", file=sys.stderr)
        return _index_mirror(request)
    return path, source.select_releases(source.release_tags(path), request.count, request.since, request.until)


def _index_mirror(request: ReleasesRequest) -> tuple[Path, list[str]]:
    from . import mirror

    available = ["v" + v for v in mirror.final_releases(mirror.available_releases())]
    tags = source.select_releases(available, request.count, request.since, request.until)
    path = request.scan.cache_dir / "index-mirror"
    mirror.import_releases(path, [t[1:] for t in tags], request.scan.cache_dir, request.scan.progress)
    return path, tags


def scan_releases(request: ReleasesRequest) -> list[tuple[Catalog, ScanStats]]:
    """Every release's catalog, oldest first; each reuses what the scans before it cached."""
    path, tags = release_repository(request)
    results = []
    for n, tag in enumerate(tags, 1):
        catalog, stats = scan_release(replace(request.scan, repo=str(path), ref=tag))
        print(f"[{n}/{len(tags)}] scanned {summary_line(catalog, stats)}", flush=True)
        results.append((catalog, stats))
    return results


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
        where = f"{problem.path}:{problem.line}" if problem.line else problem.path
        print(f"problem: {where}: {problem.kind}: {problem.detail}", file=sys.stderr)


ANNOTATIONS_DIR = DATA_DIR / "annotations"


def load_glossary(path: Path) -> tuple[GlossaryTerm, ...]:
    """The glossary's terms; a malformed entry stops the build with its file, line and fault."""
    name = f"{path.parent.name}/{path.name}"
    return parse_glossary(name, read_annotation(path, name))


def load_notes(directory: Path) -> dict[str, Note]:
    """Every curated note; one malformed note stops the build with its file, line and fault."""
    notes = {}
    for path in sorted(directory.glob("*.md")):
        name = f"{directory.name}/{path.name}"
        note = parse_note(name, read_annotation(path, name))
        notes[note.id] = note
    return notes


def annotate_catalog(
    catalog: Catalog,
    annotations_dir: Path = ANNOTATIONS_DIR,
    llm: LlmConfig | None = None,
    history: History | None = None,
    snapshots: dict[str, Snapshot] | None = None,
) -> tuple[KnowledgeBase, NotesReport, list[tuple[str, str]]]:
    """The knowledge base with every annotator run in order (derived, then the LLM if asked, then curated notes);
    also the notes' staleness report and the LLM's failures. `history` and `snapshots`: see build_knowledge_base."""
    # Absent is fine; anything else there (a directory, an unreadable file) is read, and fails in one line.
    glossary = load_glossary(annotations_dir / "glossary.yaml") if (annotations_dir / "glossary.yaml").exists() else ()
    notes = load_notes(annotations_dir) if annotations_dir.is_dir() else {}
    if history is not None:
        notes = follow_rewordings(notes, history.errors)
    catalog = resolve_factories(catalog)
    errors = {e.id: e for e in catalog.errors}
    derived = derived_annotator(catalog)
    annotators: list = [derived]
    failures: list[tuple[str, str]] = []
    if llm is not None:
        from .llm import LlmAnnotator

        ai = LlmAnnotator(llm, derived)
        ai.prefetch(catalog.errors)
        annotators.append(ai)
        failures = ai.failures
    annotators.append(curated_annotator(notes, errors))
    reports = along_lineage(load_reports(annotations_dir / "reports"), history.errors if history else None)
    kb = build_knowledge_base(catalog, tuple(annotators), glossary, history, snapshots, reports)
    outside_file = annotations_dir / "outside.yaml"
    if outside_file.exists():
        kb = replace(kb, outside=resolve_outside(load_outside(outside_file), kb.records))
    flags = {name for flag in catalog.flags for name in flag.flags}
    return kb, check_notes(notes, errors, flags, {var.name for var in catalog.env_vars}), failures


def mkdocs_config(config_file: Path, **overrides):
    """mkdocs.yml with the nav hook named by its installed path: the configuration's own `hooks:` entry is a
    path in the checkout, which an installed wheel does not have."""
    return load_config(config_file=str(config_file), hooks=[mkdocs_hooks.__file__], **overrides)


DOCS_DIR = WORK_DIR / "build" / "docs"  # generated pages stay out of site/, the hand-written pages in git


@dataclass(frozen=True)
class BuildRequest:
    scan: ScanRequest
    site_dir: Path = WORK_DIR / "build" / "site"
    docs_dir: Path | None = None  # the generated pages and the hand-written ones, as mkdocs reads them; None: DOCS_DIR
    report_repo: str = "vllm-errors/vllm-errors"  # where "report a problem with this page" opens an issue
    config_file: Path = DATA_DIR / "mkdocs.yml"


@dataclass(frozen=True)
class BuildStats:
    pages: int
    api_files: int
    site_bytes: int
    search_index_bytes: int
    warnings: int
    seconds: float


def sync_tree(root: Path, files: dict[str, str], owned: set[str]) -> int:
    """Make the generated part of `root` hold exactly `files`; returns how many files were written.

    `owned` names the top-level entries that are generated; anything else under `root` is
    hand-written and left alone. Unchanged files are not rewritten, so their times stay.
    """
    wanted = {root / rel for rel in files}
    for top in owned:
        entry = root / top
        stale = [entry] if entry.is_file() else [p for p in entry.rglob("*") if p.is_file()] if entry.is_dir() else []
        for path in stale:
            if path not in wanted:
                path.unlink()
    written = 0
    for rel, text in sorted(files.items()):
        path = root / rel
        data = text.encode("utf-8")
        if path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data:
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written += 1
    return written


def _commit_epoch(date: str) -> str:
    return str(int(datetime.fromisoformat(date).timestamp()))


def build_site(kb: KnowledgeBase, request: BuildRequest) -> BuildStats:
    """Render pages and the API into a new docs folder, build the site from it with mkdocs, then swap both in.

    Each output is made in a staging folder beside it and put in place whole (`_swap`): a failed,
    interrupted or killed build leaves the previous docs and site as they were.
    """
    started = time.perf_counter()
    if not request.config_file.is_file():
        raise UserError(f"no mkdocs configuration at {request.config_file}: reinstall vllm-errors, or run it from a checkout of the project")
    from .bundle import site_url
    from .render import render_agent_files, render_pages  # jinja2 is the renderer's alone; scanning does not load it

    pages = render_pages(kb, request.report_repo)
    agent_files = render_agent_files(kb, site_url())
    api = render_api(kb)
    both = sorted(pages.keys() & api.keys())
    if both:
        raise RuntimeError(f"internal error: {both[0]} is both a page and an API file")
    generated = {**pages, **api}
    hand_written = Path(mkdocs_config(request.config_file).docs_dir).resolve()
    docs_dir = (request.docs_dir or DOCS_DIR).resolve()
    site_dir = request.site_dir.resolve()
    _check_outputs(hand_written, docs_dir, site_dir)

    counter = _WarningCounter()
    mkdocs_log = logging.getLogger("mkdocs")
    mkdocs_log.addHandler(counter)
    old_epoch = os.environ.get("SOURCE_DATE_EPOCH")
    # mkdocs dates the sitemap with the build time; the commit's date makes builds reproducible.
    os.environ["SOURCE_DATE_EPOCH"] = _commit_epoch(kb.snapshot.date)
    try:
        with _one_build_at_a_time(docs_dir.parent, site_dir.parent), _staged(docs_dir) as docs, _staged(site_dir) as staging:
            _copy_hand_written(hand_written, docs, _tops(generated))
            sync_tree(docs, generated, _tops(generated))
            mkdocs_build(mkdocs_config(request.config_file, docs_dir=str(docs), site_dir=str(staging)))
            for rel, text in agent_files.items():  # beside the pages, not through mkdocs: a .md there would be a page
                (staging / rel).write_text(text, encoding="utf-8")
            index_site(staging)
            _swap(docs, docs_dir)
            _swap(staging, site_dir)
    except MkDocsException as e:
        raise UserError(f"mkdocs could not build the site: {e}") from None
    finally:
        mkdocs_log.removeHandler(counter)
        if old_epoch is None:
            os.environ.pop("SOURCE_DATE_EPOCH", None)
        else:
            os.environ["SOURCE_DATE_EPOCH"] = old_epoch
    for line in counter.lines:
        print(f"mkdocs: {line}", file=sys.stderr)
    search = site_dir / SEARCH_DIR
    return BuildStats(
        pages=sum(1 for rel in pages if rel.endswith(".md")),
        api_files=len(api),
        site_bytes=sum(p.stat().st_size for p in site_dir.rglob("*") if p.is_file()),
        search_index_bytes=sum(p.stat().st_size for p in search.rglob("*") if p.is_file()),
        warnings=len(counter.lines),
        seconds=round(time.perf_counter() - started, 2),
    )


ALWAYS_GENERATED = {"releases"}  # generated by some builds only: a hand-written folder of that name is left out all the same


def _tops(files: dict[str, str]) -> set[str]:
    return {rel.split("/", 1)[0] for rel in files} | ALWAYS_GENERATED


def _copy_hand_written(src: Path, dest: Path, generated_tops: set[str]) -> None:
    """Copy the hand-written pages into the docs folder being built.

    Whatever a build of an older vllm-errors left in the hand-written folder (it rendered into
    site/) sits under a generated name and is left out, so it cannot reach the site.
    """
    dest.mkdir(parents=True, exist_ok=True)
    if not src.is_dir():
        return
    for entry in src.iterdir():
        if entry.name in generated_tops or entry.name.startswith("."):
            continue
        target = dest / entry.name
        if entry.is_dir():
            shutil.copytree(entry, target, dirs_exist_ok=True)
        else:
            shutil.copy2(entry, target)


def _check_outputs(hand_written: Path, docs_dir: Path, site_dir: Path) -> None:
    """Refuse outputs that a build, which replaces each whole, must not replace."""

    def overlap(a: Path, b: Path) -> bool:
        return a.is_relative_to(b) or b.is_relative_to(a)

    for option, output in (("--docs-dir", docs_dir), ("--site-dir", site_dir)):
        if overlap(output, hand_written):
            raise UserError(
                f"{option} {output} overlaps {hand_written}, the hand-written pages (docs_dir in mkdocs.yml): "
                "give a folder outside it, such as build/docs or build/site"
            )
    if overlap(docs_dir, site_dir):
        raise UserError(f"--docs-dir {docs_dir} and --site-dir {site_dir} overlap: give two separate folders")
    if docs_dir.is_dir() and any(docs_dir.iterdir()) and not (docs_dir / NAV_JSON).is_file():
        raise UserError(
            f"--docs-dir {docs_dir} holds files vllm-errors did not write (it has no {NAV_JSON}): "
            "give a new or empty folder; each build replaces it whole"
        )


COMPLETE = ".vllm-errors-complete"  # written into a staging folder once it is whole; only such a folder is put in place


@contextmanager
def _one_build_at_a_time(*folders: Path) -> Iterator[None]:
    """Hold an exclusive lock on the folders the outputs sit in, for the whole build.

    While it is held no other build writes there, so every staging folder or `.old` found beside
    an output is a dead build's. A build that finds the lock taken waits for it, saying so.
    """
    fds: list[int] = []
    try:
        for folder in sorted(set(folders)):
            folder.mkdir(parents=True, exist_ok=True)
            if fcntl is None:  # no flock (Windows): builds are not guarded against each other
                continue
            fds.append(os.open(folder, os.O_RDONLY))
            try:
                fcntl.flock(fds[-1], fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                print(f"waiting for another vllm-errors build writing in {folder} to end", file=sys.stderr, flush=True)
                fcntl.flock(fds[-1], fcntl.LOCK_EX)
        yield
    finally:
        for fd in fds:
            os.close(fd)


@contextmanager
def _staged(target: Path) -> Iterator[Path]:
    """A new staging folder beside `target` to make its next version in, once dead builds' leftovers are cleared.

    Removed on every way out (an error, Ctrl-C) unless `_swap` has put it in place.
    """
    _clear_leftovers(target)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".building", dir=target.parent))
    try:
        os.chmod(staging, 0o777 & ~_UMASK)  # mkdtemp makes folders private; the outputs are ordinary folders
        yield staging
    finally:
        _remove(staging)


def _swap(new: Path, target: Path) -> None:
    """Put a whole new folder in place of `target`; the old one is moved aside and removed only once the new one is in.

    COMPLETE goes into the new folder first: if the build dies between the two renames, the next
    build puts this folder in place (`_clear_leftovers`). `.old` is only ever garbage.
    """
    (new / COMPLETE).touch()
    old = _old(target)
    _remove(old)
    if target.exists() or target.is_symlink():
        os.rename(target, old)
    os.rename(new, target)
    (target / COMPLETE).unlink()
    _remove(old)


def _clear_leftovers(target: Path) -> None:
    """Remove what dead builds left beside `target`: staging folders, whole or not, and `.old`, never a whole folder.

    If `target` is missing because a build died between the two renames of `_swap`, the complete
    staging folder that build was putting in place (the newest, should there be more) takes its place.
    """
    pattern = re.compile(rf"\.{re.escape(target.name)}\.[^.]+\.building")
    staging = [p for p in target.parent.iterdir() if pattern.fullmatch(p.name)]
    complete = sorted((p for p in staging if (p / COMPLETE).is_file()), key=lambda p: ((p / COMPLETE).stat().st_mtime_ns, p.name))
    if complete and not (target.exists() or target.is_symlink()):
        os.rename(complete[-1], target)
        (target / COMPLETE).unlink()
        staging.remove(complete[-1])
    for path in [*staging, _old(target)]:
        _remove(path)


def _old(target: Path) -> Path:
    return target.with_name(f".{target.name}.old")


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


class _WarningCounter(logging.Handler):
    """Collects what mkdocs warns about, to print after the build and count in the stats."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
