"""The `vllm-errors` command line: parses arguments, runs a pipeline stage, reports in one line."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Sequence, get_args

from . import pipeline, source
from .markup import printable
from .model import Kind, UserError

EXIT_PROBLEMS = 1  # the output was written, but some files could not be scanned
EXIT_USAGE = 2
DEFAULT_REPO = "https://github.com/vllm-project/vllm"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vllm-errors", description="The knowledge base of every error vLLM can raise.")
    parser.add_argument("--version", action=_VersionAction, help="the version, and the vLLM releases whose errors explain knows")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    scan = commands.add_parser("scan", help="scan a vLLM release or commit into an error catalog (JSON)")
    _add_release_options(scan)
    scan.add_argument("--output", "-o", type=Path, required=True, help="where to write the catalog JSON")
    _add_scan_options(scan)

    build = commands.add_parser("build", help="scan, annotate and render a release into the site (build/site) and its JSON API")
    _add_release_options(build)
    _add_build_options(build)
    _add_scan_options(build)

    update = commands.add_parser("update", help="scan every release in a range and build the site of the newest, with each error's history and release notes")
    update.add_argument("--repo", default=DEFAULT_REPO, help=f"vLLM's git repository, a local path or a URL (default {DEFAULT_REPO})")
    update.add_argument("--source", choices=("auto", "git", "index"), default="auto", help="where releases come from: the repository's tags (git), the source distributions on the package index pip uses (index), or git and, if it cannot be reached, the index (auto, the default)")
    update.add_argument("--releases", type=int, default=source.DEFAULT_RELEASES, metavar="N", help=f"how many releases, newest last (default {source.DEFAULT_RELEASES})")
    update.add_argument("--since", default=None, metavar="TAG", help="every release from TAG on instead, e.g. v0.27.0")
    update.add_argument("--until", default=None, metavar="TAG", help="the newest release to cover (default: the newest there is)")
    _add_build_options(update)
    _add_scan_options(update)

    mirror = commands.add_parser("mirror", help="import vLLM releases from the package index pip uses into a local git mirror, one tagged commit each")
    mirror.add_argument("dest", type=Path, help="the mirror's directory (made if missing)")
    mirror.add_argument("versions", nargs="*", metavar="VERSION", help="releases to import, e.g. 0.28.0 0.33.0")
    mirror.add_argument("--latest", type=int, default=None, metavar="N", help="the N newest releases instead")
    mirror.add_argument("--cache-dir", type=Path, default=None, help="where downloads are kept (default: ~/.cache/vllm-errors, or $VLLM_ERRORS_CACHE)")
    mirror.add_argument("--no-progress", action="store_true", help="no progress bar, even on a terminal")

    report = commands.add_parser("report", help="annotation coverage by field and source, and stale or orphaned curated notes")
    _add_release_options(report)
    _add_annotation_options(report)
    _add_scan_options(report)

    note = commands.add_parser("note", help="start a curated note for an error: annotations/<id>.md, pre-filled from the code")
    note.add_argument("id", help="the error's 16-hex id (see its page or the API)")
    _add_release_options(note)
    _add_annotation_options(note)
    _add_scan_options(note)

    refresh = commands.add_parser("refresh-reports", help="search GitHub's issues for the errors new or reworded since the last refresh: candidate reports to confirm (needs GITHUB_TOKEN)")
    _add_release_options(refresh)
    _add_annotation_options(refresh)
    _add_scan_options(refresh)
    refresh.add_argument("--api-url", default=None, metavar="URL", help="GitHub's API (default https://api.github.com)")
    refresh.add_argument("--limit", type=int, default=None, metavar="N", help="search for at most N errors this time (the next run goes on)")

    explain = commands.add_parser("explain", help="look up a pasted error or traceback (the text, or standard input)")
    explain.add_argument("text", nargs="?", help="the error; read from standard input when left out")
    explain.add_argument("--site", default=None, help="a built site's folder or a published site's URL (default: the last build of this checkout, else the index this install carries, else the published site)")
    explain.add_argument("--json", action="store_true", help="the answer as JSON: its kind (vllm, wrapper, outside, none), the matches with id and score, the context")
    explain.add_argument("--version", default=None, help="the vLLM version that printed the error, e.g. 0.8.5 (read from the paste when it names one)")
    explain.add_argument("--top", type=int, default=5, help="how many matches to show (default 5)")

    bundle = commands.add_parser("bundle", help="write the lookup index and the records explain prints, from a built site, for the wheel to carry")
    bundle.add_argument("--site", type=Path, default=None, help="the built site (default: build/site)")
    bundle.add_argument("--out", type=Path, default=None, help="where the bundle goes (default: the package's bundle/, which the wheel carries)")

    mcp = commands.add_parser("mcp", help="serve the knowledge base to AI assistants: an MCP server on standard input and output")
    mcp.add_argument("--site", default=None, help="a built site's folder or a published site's URL (default: as explain)")

    serve = commands.add_parser("serve", help="serve the built site locally")
    serve.add_argument("--site-dir", type=Path, default=None, help="the built site (default: build/site)")
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: 127.0.0.1, this machine only)")
    serve.add_argument("--port", type=_port, default=8000, help="0 to 65535; 0 picks a free one (default: 8000)")
    return parser


class _VersionAction(argparse.Action):
    """--version: said lazily, since it reads the bundled index."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


def version_line() -> str:
    from importlib.metadata import PackageNotFoundError, version

    from .bundle import bundled_site, covered

    try:
        mine = version("vllm-errors")
    except PackageNotFoundError:
        mine = "(not installed)"
    try:
        site = bundled_site()
    except (UserError, OSError, ValueError):
        site = None
    if site is None:
        return f"vllm-errors {mine}: no bundled index; explain reads a built site (--site) or the published one"
    return f"vllm-errors {mine}: errors of vLLM {covered(site.index)} (bundled index)"


def _add_release_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repo", required=True, help="local git repository or URL (URLs are cloned once into the cache)")
    parser.add_argument("--ref", required=True, help="tag, branch or commit, e.g. v0.33.0")


def _add_build_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--site-dir", type=Path, default=None, help="where the built site goes (default: build/site)")
    parser.add_argument("--docs-dir", type=Path, default=None, help="where the Markdown mkdocs builds from is assembled: site/'s hand-written files and the generated pages and JSON (default: build/docs)")
    parser.add_argument("--report-repo", default="vllm-errors/vllm-errors", metavar="OWNER/NAME", help="GitHub repository for 'report a problem with this page'")
    _add_annotation_options(parser)
    parser.add_argument("--llm-url", default=None, metavar="URL", help="OpenAI-compatible endpoint for AI-assisted annotations, e.g. http://127.0.0.1:8000/v1 (off by default)")
    parser.add_argument("--llm-model", default=None, metavar="NAME", help="the model to ask, with --llm-url")


def _add_scan_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache-dir", type=Path, default=None, help="cache of clones and scans (default: ~/.cache/vllm-errors, or $VLLM_ERRORS_CACHE)")
    parser.add_argument("--include", action="append", metavar="GLOB", help=f"paths to scan (repeatable; default {' '.join(source.DEFAULT_INCLUDE)})")
    parser.add_argument("--exclude", action="append", metavar="GLOB", help=f"paths to leave out (repeatable; default {' '.join(source.DEFAULT_EXCLUDE)})")
    parser.add_argument("--github-repo", default=None, metavar="OWNER/NAME", help="GitHub repository that ids and permalinks name (default: from a GitHub --repo URL, else vllm-project/vllm)")
    parser.add_argument("--jobs", type=int, default=0, help="processes for scanning (default: one per core)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar, even on a terminal")


def _add_annotation_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--annotations", type=Path, default=pipeline.ANNOTATIONS_DIR, metavar="DIR", help="curated notes and the glossary (default: annotations/)")


def _scan_request(args: argparse.Namespace) -> pipeline.ScanRequest:
    if args.jobs < 0:
        raise UserError(f"--jobs {args.jobs} is negative: give 0 (one per core) or more")
    github = args.github_repo or source.github_slug(args.repo) or "vllm-project/vllm"
    return pipeline.ScanRequest(
        repo=args.repo,
        ref=getattr(args, "ref", None) or "HEAD",  # update scans its releases instead
        cache_dir=args.cache_dir or pipeline.default_cache_dir(),
        repository=github,
        include=tuple(args.include or source.DEFAULT_INCLUDE),
        exclude=tuple(args.exclude) if args.exclude is not None else source.DEFAULT_EXCLUDE,
        jobs=args.jobs,
        progress=False if args.no_progress else None,
    )


def _scan(args: argparse.Namespace) -> int:
    catalog, stats = pipeline.scan_release(_scan_request(args))
    pipeline.write_catalog(catalog, args.output)
    pipeline.print_problems(catalog)
    print(f"scanned {pipeline.summary_line(catalog, stats)} -> {args.output}")
    return EXIT_PROBLEMS if catalog.problems else 0


def _build(args: argparse.Namespace) -> int:
    llm = _check_build_options(args)
    scan_request = _scan_request(args)
    catalog, stats = pipeline.scan_release(scan_request)
    pipeline.print_problems(catalog)
    print(f"scanned {pipeline.summary_line(catalog, stats)}")
    return _annotate_and_build(args, scan_request, catalog, llm)


def _update(args: argparse.Namespace) -> int:
    from .history import build_history, covering_catalog

    llm = _check_build_options(args)
    scan_request = _scan_request(args)
    request = pipeline.ReleasesRequest(scan_request, args.source, args.releases, args.since, args.until)
    catalogs = [catalog for catalog, _ in pipeline.scan_releases(request)]
    history = build_history(catalogs)
    catalog, snapshots = covering_catalog(catalogs)
    for notes in history.notes[1:]:
        print(
            f"{notes.ref}: {notes.errors} errors; since {notes.previous}: {len(notes.added)} added, "
            f"{len(notes.removed)} removed, {len(notes.reworded)} reworded, {len(notes.moved)} moved"
        )
    pipeline.print_problems(catalogs[-1])
    return _annotate_and_build(args, scan_request, catalog, llm, history, snapshots)


def _mirror(args: argparse.Namespace) -> int:
    from . import mirror

    if bool(args.versions) == (args.latest is not None):
        raise UserError("give the versions to import, or --latest N, not both")
    versions = list(args.versions)
    if args.latest is not None:
        if args.latest < 1:
            raise UserError(f"--latest {args.latest}: give 1 or more")
        versions = mirror.final_releases(mirror.available_releases())[-args.latest :]
    cache = args.cache_dir or pipeline.default_cache_dir()
    imported = mirror.import_releases(args.dest, versions, cache, False if args.no_progress else None)
    print(f"{args.dest}: {len(imported)} imported, {len(versions) - len(imported)} there already; tags " + ", ".join(f"v{v}" for v in versions))
    return 0


def _annotate_and_build(args, scan_request, catalog, llm, history=None, snapshots=None) -> int:
    request = pipeline.BuildRequest(
        scan=scan_request,
        site_dir=args.site_dir or pipeline.BuildRequest.site_dir,
        docs_dir=args.docs_dir,
        report_repo=args.report_repo.strip("/"),
    )
    kb, notes, failures = pipeline.annotate_catalog(catalog, args.annotations, llm, history, snapshots)
    _print_notes_report(notes)
    if llm is not None:
        print(f"AI-assisted annotations: {len(catalog.errors) - len(failures)} of {len(catalog.errors)}; {len(failures)} failed and kept the derived text")
        for error_id, reason in sorted(failures)[:10]:
            print(f"llm: {error_id}: {reason}", file=sys.stderr)
    built = pipeline.build_site(kb, request)
    print(
        f"built {built.pages} pages and {built.api_files} API files: site {built.site_bytes / 1e6:.1f} MB, "
        f"search index {built.search_index_bytes / 1e6:.1f} MB, {built.warnings} warnings, {built.seconds:.1f} s -> {request.site_dir}"
    )
    return EXIT_PROBLEMS if catalog.problems else 0


def _check_build_options(args: argparse.Namespace):
    """Refuse bad build options before any scanning; returns the LLM configuration, if any."""
    if "/" not in args.report_repo.strip("/"):
        raise UserError(f"--report-repo {args.report_repo!r} is not OWNER/NAME: give a GitHub repository such as vllm-errors/vllm-errors")
    return _llm_config(args)


def _llm_config(args: argparse.Namespace):
    if (args.llm_url is None) != (args.llm_model is None):
        raise UserError("--llm-url and --llm-model go together: give both, or neither for no AI-assisted text")
    if args.llm_url is None:
        return None
    if not args.llm_url.startswith(("http://", "https://")):
        raise UserError(f"--llm-url {args.llm_url!r} is not an http(s) URL: give one such as http://127.0.0.1:8000/v1")
    from .llm import LlmConfig

    cache = args.cache_dir or pipeline.default_cache_dir()
    return LlmConfig(url=args.llm_url.rstrip("/"), model=args.llm_model, cache_dir=cache, api_key=os.environ.get("VLLM_ERRORS_LLM_KEY"))


def _print_notes_report(notes) -> None:
    for name in notes.stale:
        print(f"stale note: {name}: the code it was written against has changed; review it and update its code_hash", file=sys.stderr)
    for name in notes.orphaned:
        print(f"orphaned note: {name}: its error is not in this release (reworded or removed)", file=sys.stderr)
    for line in notes.unknown_settings:
        print(f"note names settings this release does not declare: {line}", file=sys.stderr)
    for name in notes.reporting:
        print(f"note gives 'report it' as a solution: {name}: it is no lever (an internal error's page has its own section)", file=sys.stderr)


def _report(args: argparse.Namespace) -> int:
    catalog, _ = pipeline.scan_release(_scan_request(args))
    kb, notes, _ = pipeline.annotate_catalog(catalog, args.annotations)
    for line in coverage_lines(kb):
        print(line)
    print(reports_line(kb))
    print(f"curated notes: {sum(1 for r in kb.records if 'curated' in r.annotation.sources.values())}, "
          f"stale: {len(notes.stale)}, orphaned: {len(notes.orphaned)}, naming settings the release lacks: {len(notes.unknown_settings)}, "
          f"with 'report it' as a solution: {len(notes.reporting)}")
    for name in notes.stale:
        print(f"  stale: {name}")
    for name in notes.orphaned:
        print(f"  orphaned: {name}")
    for line in notes.unknown_settings:
        print(f"  unknown settings: {line}")
    for name in notes.reporting:
        print(f"  'report it' as a solution: {name}")
    return 0


def reports_line(kb) -> str:
    """How much of what people report the curated notes explain: errors with reports, and the reports (occurrences)
    on errors with a note."""
    reported = [r for r in kb.records if r.reports]
    total = sum(len(r.reports) for r in reported)
    noted = [r for r in reported if "curated" in r.annotation.sources.values()]
    covered = sum(len(r.reports) for r in noted)
    twice = [r for r in reported if len(r.reports) >= 2]
    return (f"public reports: {total} on {len(reported)} errors; curated notes cover {covered} of them "
            f"({covered / (total or 1):.1%} of reported occurrences) on {len(noted)} errors; errors reported twice or more: "
            f"{len(twice)}, with a note: {sum(1 for r in twice if r in noted)}")


def coverage_lines(kb) -> list[str]:
    """A table of annotation coverage: per field, how many errors have it and where the text came from."""
    total = len(kb.records) or 1
    fields = ("meaning", "triggers", "situations", "solutions", "example_fix")
    lines = [f"{'field':<12} {'errors':>7} {'share':>6}   derived  curated       ai", "-" * 55]
    for name in fields:
        have = [r for r in kb.records if getattr(r.annotation, name)]
        by = {src: sum(1 for r in have if r.annotation.sources.get(name) == src) for src in ("derived", "curated", "ai")}
        lines.append(f"{name:<12} {len(have):>7} {len(have) / total:>6.1%} {by['derived']:>8} {by['curated']:>8} {by['ai']:>8}")
    both = sum(1 for r in kb.records if r.annotation.triggers and r.annotation.solutions)
    kinds = {k: sum(1 for r in kb.records if r.annotation.kind == k) for k in get_args(Kind)}
    lines.append(f"trigger and a solution: {both} of {len(kb.records)} ({both / total:.1%}); "
                 "kinds: " + ", ".join(f"{n} {k}" for k, n in kinds.items()))
    levers = {name: sum(1 for r in kb.records if any(pattern.search(s) for s in r.annotation.solutions)) for name, pattern in LEVERS.items()}
    named = sum(1 for r in kb.records if any(p.search(s) for s in r.annotation.solutions for p in LEVERS.values()))
    lines.append(f"solutions naming a lever a user holds: {named} of {len(kb.records)} ({named / total:.1%}): "
                 + ", ".join(f"{n} {name}" for name, n in levers.items()))
    passed = sum(1 for r in kb.records if any(THROUGH_CALLERS in s for s in r.annotation.solutions))
    caught = sum(1 for r in kb.records if CAUGHT in (r.annotation.meaning or ""))
    advised = sum(1 for r in kb.records if any(s.startswith(ADVICE) for s in r.annotation.solutions))
    lines.append(f"of those, reached through what the callers pass for a parameter: {passed}; quoting the message's own advice: {advised}; "
                 f"labelled internal: {kinds['internal']} of {len(kb.records)} ({kinds['internal'] / total:.1%}); "
                 f"every call in vLLM catches it: {caught} ({caught / total:.1%}); every call wraps it in another error: "
                 f"{sum(1 for r in kb.records if WRAPPED in (r.annotation.meaning or ''))}; its own `try` block takes it: "
                 f"{sum(1 for r in kb.records if IN_PLACE in (r.annotation.meaning or ''))}; found by the line vLLM logs in its place: "
                 f"{sum(1 for r in kb.records if r.annotation.logged)}")
    phased = sum(1 for r in kb.records if any(end in (r.annotation.meaning or "") for end in ENDS))
    lines.append(f"say the phase of startup the check runs in and what its failure ends: {phased} ({phased / total:.1%})")
    selected = sum(1 for r in kb.records if SELECTED in (r.annotation.meaning or ""))
    around = sum(1 for r in kb.records if any(AVOIDED in s for s in r.annotation.solutions))
    lines.append(f"run only when a connector, model architecture, parser or backend is selected: {selected} ({selected / total:.1%}); "
                 f"with another one to select as a way around it: {around}")
    platforms = sum(1 for r in kb.records if PLATFORMS_SAID in (r.annotation.meaning or ""))
    wrapped = sum(1 for r in kb.records if any(t in (r.annotation.meaning or "") for t in (TRIED, TRIED_WRAPPER)))
    lines.append(f"loaded only on some platforms: {platforms}; raised in an `except` block, naming what its `try` block runs: {wrapped}")
    return lines


# What a solution names that a user can change: a `vllm serve` flag, a key of a JSON flag, a VLLM_* environment
# variable, a key of the checkpoint's config.json, a field of a request (or of SamplingParams).
LEVERS = {
    "flag": re.compile(r"(?<!` in )`--[a-z][a-z0-9-]*`(?! option of `vllm )"),
    "key of a JSON flag": re.compile(r"` in `--[a-z][a-z0-9-]*`"),
    "environment variable": re.compile(r"`VLLM_[A-Z0-9_]+`|the environment variable `[A-Z_][A-Z0-9_]*`"),
    "key of the checkpoint's config.json": re.compile(r"in the model's `config.json`"),
    "request field": re.compile(r"the request field `|\(the request's `"),
    "the checkpoint itself": re.compile(r"^Check the model's checkpoint|Use a checkpoint whose|in the model's quantization config"),
    "option of another command": re.compile(r"` option of `vllm "),
}
THROUGH_CALLERS = "it reaches this code as a parameter"
CAUGHT = "it catches this error ("  # annotate.Deriver.caught_by_callers
WRAPPED = "it catches this error and raises "  # annotate.Deriver.wrapped_by_callers
IN_PLACE = "The `try` block around this raise catches it"  # annotate.Deriver.caught_in_place
ENDS = ("the engine does not start:", "stops with this error, before the engine starts")  # annotate.ENGINE_FAILED, _STARTUP_ENDS
ADVICE = "Do what the message says: "  # annotate.Deriver.advice
PLATFORMS_SAID = "is made under a `current_platform.is_"  # annotate.Deriver.platforms_said
TRIED = "block runs: `"  # annotate.Deriver.wrapped, for a re-raise, ...
TRIED_WRAPPER = "block before it runs (`"  # ... and for a wrapper
SELECTED = "this code runs only when"  # selection.runs_only_when
AVOIDED = "(this code runs only with"  # selection.ways_around


def _note(args: argparse.Namespace) -> int:
    from .annotate import derived_annotator
    from .catalog import resolve_factories
    from .knowledge import title_of
    from .notes import ID, render_note

    if not ID.fullmatch(args.id):
        raise UserError(f"{args.id!r} is not an error id: give the 16 hex characters from the error's page or /api/errors.json")
    catalog, _ = pipeline.scan_release(_scan_request(args))
    catalog = resolve_factories(catalog)
    error = next((e for e in catalog.errors if e.id == args.id), None)
    if error is None:
        raise UserError(f"no error {args.id} in {args.ref}: check the id against this release's /api/errors.json")
    path = args.annotations / f"{args.id}.md"
    if path.exists():
        raise UserError(f"{path} exists already: edit it, or delete it to start again")
    text = render_note(error, title_of(error), derived_annotator(catalog)(error))
    pipeline.write_text(path, text)
    print(f"wrote {path}: edit it, keep its code_hash, and build")
    return 0


def _refresh_reports(args: argparse.Namespace) -> int:
    import os

    from .catalog import resolve_factories
    from .knowledge import build_knowledge_base
    from .refresh import API_URL, GitHub, refresh, token_from

    client = GitHub(token_from(os.environ), api_url=args.api_url or API_URL)  # no token: say so before scanning
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit {args.limit}: give 1 or more")
    catalog, _ = pipeline.scan_release(_scan_request(args))
    kb = build_knowledge_base(resolve_factories(catalog))
    done = refresh(kb, args.annotations / "reports", client, progress=False if args.no_progress else None, limit=args.limit)
    print(f"searched for {done.searched} errors ({done.skipped} with too little literal text to search for) in "
          f"{done.requests} requests, {done.waited:.0f} s waiting on the rate limit: {done.candidates} new candidate reports "
          f"in {args.annotations / 'reports' / 'candidates'}; confirm each by reading its thread, then move it into "
          f"{args.annotations / 'reports'}/<id>.yaml")
    return 0


def _explain(args: argparse.Namespace) -> int:
    import json

    from . import lookup
    from .bundle import open_site

    text = args.text if args.text is not None else sys.stdin.read()
    if not text.strip():
        raise UserError("nothing to look up: give the error as an argument, or paste it on standard input")
    site = open_site(args.site)
    paste = lookup.read_paste(text)
    if args.version:
        paste = replace(paste, version=args.version)
    answer = lookup.answer(site.index, paste, top=max(1, args.top))
    if args.json:
        print(json.dumps(answer_data(answer), indent=1, ensure_ascii=False))
        return 0 if answer.kind != "none" else 1
    for line in answer_lines(answer, site):
        print(printable(line))  # values come from the paste, titles from vLLM's source: shown, never obeyed
    return 0 if answer.kind != "none" else 1


def answer_data(answer) -> dict:
    """The answer as `explain --json` prints it."""

    def finding(f) -> dict:
        return {
            "kind": f.kind,
            "exception": {"type": f.raised.type, "message": f.raised.message},
            "outside": {"name": f.outside.name, "says": f.outside.says, "see": list(f.outside.see)} if f.outside else None,
            "assertion": {"path": f.assertion.path, "line": f.assertion.line, "function": f.assertion.function, "code": f.raised.source,
                          "releases": [{"release": r, "line": n} for r, n in f.lines]}
            if f.assertion else None,
            "matches": [{"id": m.id, "title": m.title, "score": m.score, "confidence": m.confidence, "how": m.how,
                         "url": f"errors/{m.id}.html", "values": m.values} for m in f.matches],
        }

    return {
        "kind": answer.kind,
        "version": answer.version,
        "answer": finding(answer.finding) if answer.finding else None,
        "context": [finding(f) for f in answer.context],
    }


def assert_release(found, version: str | None) -> str:
    """Which release the line of an assert is: the paste's, else the newest with the check at that line."""
    if version:
        return f" (vLLM {version})"
    newest = next((r for r, n in reversed(found.lines) if n == found.assertion.line), None)
    count = len(found.lines)
    return f" (as in vLLM {newest}; the same check is in {count} release{'s' if count != 1 else ''})" if newest else ""


UNKNOWN_CAUSE = ("The error vLLM's wrapper points at is not one vLLM raises: it comes from a library vLLM calls "
                 "(PyTorch, CUDA, Ray, transformers, ...) or from your own code. Search for it under that library's name:")
ASSERT_ADVICE = ("An assert without a message is vLLM checking its own assumptions: it has no page here. Read its condition "
                 "against the model and the flags you used; if nothing you set explains it, report it to vLLM with the whole traceback.")


def answer_lines(answer, site) -> list[str]:
    """The answer as a terminal reads it: the root cause explained, then what surrounded it in the paste."""
    found = answer.finding
    index = site.index
    titles = {e["i"]: e["n"] for e in index["errors"]}
    lines: list[str] = []
    if found is None or found.kind == "none":
        covered = f"{index['releases'][0]} to {index['releases'][-1]}" if len(index["releases"]) > 1 else index["release"]
        lines.append(f"No vLLM error matches this paste (vLLM {covered}).")
        wrappers = [f for f in answer.context if f.kind == "wrapper"]
        if found and wrappers:
            pasted = f"{found.raised.type}: {found.raised.message}" if found.raised.type else found.raised.message
            lines += [UNKNOWN_CAUSE, f"  {_shorten(pasted)}"]
            lines += [f"Then reported as: {f.matches[0].title}  ->  {site.page(f.matches[0].id)}" for f in wrappers]
        if found and found.matches:
            lines.append("Closest candidates, none of them a match:")
            lines += [f"  {m.title}  ->  {site.page(m.id)}" for m in found.matches]
        return lines
    if found.kind == "assert":
        where = found.assertion
        lines += [f"An internal check of vLLM failed: {found.raised.source}",
                  f"  in {where.function}, {where.path}:{where.line}" + assert_release(found, answer.version),
                  ASSERT_ADVICE]
    elif found.kind == "outside":
        pasted = f"{found.raised.type}: {found.raised.message}" if found.raised.type else found.raised.message
        lines += [found.outside.says, f"  {_shorten(pasted)}"]
        vllm_frames = [f for f in found.raised.frames if f.path]
        if vllm_frames:
            last = vllm_frames[-1]
            lines.append(f"vLLM was running {last.path}:{last.line} in {last.function} when it happened.")
        if found.outside.see:
            lines.append("vLLM's pages on the usual cause:")
            lines += [f"  {titles.get(i, i)}  ->  {site.page(i)}" for i in found.outside.see]
    else:
        best = found.matches[0]
        lines += explanation(site.record(best.id), best, site)
        if found.kind == "wrapper":
            lines += ["", "This error only points at another one: the real error was printed earlier in the log, often by",
                      "another process (lines tagged (EngineCore pid=...), (EngineCore_DP0 pid=...) or (Worker pid=...)). Paste the whole log to find it."]
            causes = next((e.get("c", []) for e in index["errors"] if e["i"] == best.id), [])
            if causes:
                lines.append("The errors reported most often behind it, in public issues:")
                lines += [f"  {titles.get(i, i)}  ->  {site.page(i)}" for i in causes[:5]]
        if len(found.matches) > 1:
            lines.append("\nOther candidates:")
            lines += [f"  [{m.confidence}] {m.title}  ->  {site.page(m.id)}" for m in found.matches[1:]]
    for f in answer.context:
        if f.kind in ("vllm", "wrapper") and f.matches:
            role = "Then reported as" if f.kind == "wrapper" else "Raised while handling"
            lines.append(f"\n{role}: {f.matches[0].title}  ->  {site.page(f.matches[0].id)}")
    return lines


def _shorten(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def explanation(record: dict, match, site) -> list[str]:
    """The best match as a terminal reads it: title, values, meaning, trigger, solutions, link. `record` is the
    compact form (bundle.compact), `site` a bundle.Site."""
    a = record["annotation"]
    lines = [f"{record['title']}   [{match.confidence} confidence, {match.how} match]"]
    where = [f"{s['path']}:{s['line']} in {s['function']}" for s in record["sites"]]
    lines.append(f"raised at {'; '.join(where)}{' ...' if record['more_sites'] else ''} ({record['ref']})")
    history = record.get("history")
    if history and history["status"] == "removed":
        then = f"vLLM raised it up to {history['last']}"
        if history["superseded_by"]:
            lines.append(f"{then}; reworded in {history['removed_in']}: {site.page(history['superseded_by'])}")
        else:
            lines.append(f"{then}; removed in {history['removed_in']}")
    if match.values:
        lines.append("values: " + ", ".join(f"{k} = {v}" for k, v in match.values.items()))
    if a.get("meaning"):
        lines += ["", "What it means:", f"  {a['meaning']}"]
    if a.get("triggers"):
        lines += ["", "When it happens:"] + [f"  - {t}" for t in a["triggers"]]
    if a.get("solutions"):
        lines += ["", "Solutions:"] + [f"  {n}. {s}" for n, s in enumerate(a["solutions"], 1)]
    elif a.get("kind") == "internal":
        lines += ["", "This looks like a bug in vLLM: report it with the full traceback."]
    lines += ["", f"More: {site.link(record['url'])}"]
    return lines


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give a number from 0 to 65535")
    return port


def _bundle(args: argparse.Namespace) -> int:
    from .bundle import BUNDLE_DIR, write_bundle

    site = args.site or pipeline.BuildRequest.site_dir
    out = args.out or BUNDLE_DIR
    sizes = write_bundle(site, out)
    said = ", ".join(f"{name} {size / 1e6:.1f} MB" for name, size in sizes.items())
    print(f"bundle of {site} in {out}: {said}")
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from .bundle import open_site
    from .mcp_server import make_server

    make_server(open_site(args.site)).run("stdio")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from .serve import exposure_warning, make_server, preview_url

    site_dir = args.site_dir or pipeline.BuildRequest.site_dir
    if not (site_dir / "index.html").is_file():
        raise UserError(f"no built site in {site_dir}: run 'vllm-errors build' first, or give --site-dir")
    try:
        server = make_server(site_dir, args.host, args.port)
    except OSError as e:
        raise UserError(f"cannot listen on {args.host}:{args.port}: {e.strerror or e}; give another --host or --port") from None
    print(f"serving {site_dir} at {preview_url(server.server_address)}: a local preview, not for production (Ctrl-C stops)", flush=True)
    if warning := exposure_warning(server.server_address):
        print(warning, file=sys.stderr, flush=True)
    with server:
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass  # Ctrl-C is how a preview ends, not an interruption of work to resume
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        commands = {"scan": _scan, "build": _build, "update": _update, "mirror": _mirror, "serve": _serve, "report": _report, "note": _note, "explain": _explain, "refresh-reports": _refresh_reports, "bundle": _bundle, "mcp": _mcp}
        return commands[args.command](args)
    except UserError as e:
        print(f"vllm-errors: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("vllm-errors: interrupted; what was scanned is cached, run again to resume", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`explain ... | head`): nothing left to say, and no traceback to say it with.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
