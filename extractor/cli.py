"""The `vllm-errors` command line: parses arguments, runs a pipeline stage, reports in one line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from . import pipeline, source
from .model import UserError

EXIT_PROBLEMS = 1  # the output was written, but some files could not be scanned
EXIT_USAGE = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vllm-errors", description="The knowledge base of every error vLLM can raise.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    scan = commands.add_parser("scan", help="scan a vLLM release or commit into an error catalog (JSON)")
    scan.add_argument("--repo", required=True, help="local git repository or URL (URLs are cloned once into the cache)")
    scan.add_argument("--ref", required=True, help="tag, branch or commit to scan, e.g. v0.33.0")
    scan.add_argument("--output", "-o", type=Path, required=True, help="where to write the catalog JSON")
    _add_scan_options(scan)
    return parser


def _add_scan_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache-dir", type=Path, default=None, help="cache of clones and scans (default: ~/.cache/vllm-errors, or $VLLM_ERRORS_CACHE)")
    parser.add_argument("--include", action="append", metavar="GLOB", help=f"paths to scan (repeatable; default {' '.join(source.DEFAULT_INCLUDE)})")
    parser.add_argument("--exclude", action="append", metavar="GLOB", help=f"paths to leave out (repeatable; default {' '.join(source.DEFAULT_EXCLUDE)})")
    parser.add_argument("--github-repo", default=None, metavar="OWNER/NAME", help="GitHub repository that ids and permalinks name (default: from a GitHub --repo URL, else vllm-project/vllm)")
    parser.add_argument("--jobs", type=int, default=0, help="processes for scanning (default: one per core)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar, even on a terminal")


def _scan_request(args: argparse.Namespace) -> pipeline.ScanRequest:
    if args.jobs < 0:
        raise UserError(f"--jobs {args.jobs} is negative: give 0 (one per core) or more")
    github = args.github_repo or source.github_slug(args.repo) or "vllm-project/vllm"
    return pipeline.ScanRequest(
        repo=args.repo,
        ref=args.ref,
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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return {"scan": _scan}[args.command](args)
    except UserError as e:
        print(f"vllm-errors: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("vllm-errors: interrupted; what was scanned is cached, run again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
