"""Benchmark: scanning many releases at once, against one cold scan of the newest.

Run from the project's checkout, against a mirror holding the releases:

    .venv/bin/python bench/history_scan.py --repo path/to/vllm-mirror --refs v0.24.0 ... v0.33.0

The reference, in the same run and in a fresh cache, is one cold scan of the last ref.
Then, in another fresh cache, every ref is scanned oldest first, as `vllm-errors update`
does: files whose blob was scanned before come from the cache, and changed files are
rescanned only in the top-level definitions that changed. It prints both times, their
ratio, and what whole-file caching alone would have to scan (the distinct blobs' bytes over
one release's), and checks that the newest release's catalog is the same either way.

Exits 1 if the history takes more than 4 times the reference, or the catalogs differ.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vllm_errors import pipeline, source  # noqa: E402
from vllm_errors.model import catalog_to_json  # noqa: E402

MAX_RATIO = 4.0


def scan(repo: str, ref: str, cache: Path, jobs: int) -> tuple[float, str]:
    started = time.perf_counter()
    catalog, _ = pipeline.scan_release(pipeline.ScanRequest(repo=repo, ref=ref, cache_dir=cache, jobs=jobs, progress=False))
    return time.perf_counter() - started, catalog_to_json(catalog)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--refs", nargs="+", required=True, help="oldest first")
    parser.add_argument("--jobs", type=int, default=0)
    args = parser.parse_args()

    blobs: dict[str, int] = {}
    for ref in args.refs:
        for f in source.read_files(Path(args.repo), ref, source.DEFAULT_INCLUDE, source.DEFAULT_EXCLUDE):
            blobs.setdefault(f.blob, len(f.data))
    newest = sum(len(f.data) for f in source.read_files(Path(args.repo), args.refs[-1], source.DEFAULT_INCLUDE, source.DEFAULT_EXCLUDE))

    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as many:
        reference, want = scan(args.repo, args.refs[-1], Path(one), args.jobs)
        print(f"reference: one cold scan of {args.refs[-1]}: {reference:.1f} s", flush=True)
        total = 0.0
        for ref in args.refs:
            seconds, got = scan(args.repo, ref, Path(many), args.jobs)
            total += seconds
            print(f"  {ref}: {seconds:.1f} s", flush=True)
    ratio = total / reference
    print(f"history: {len(args.refs)} releases: {total:.1f} s, {ratio:.2f}x the reference (limit {MAX_RATIO:.0f}x)")
    print(f"whole-file caching alone would scan {sum(blobs.values()) / newest:.2f}x one release's bytes")
    same = got == want
    print(f"{args.refs[-1]}'s catalog is {'the same' if same else 'DIFFERENT'} scanned either way")
    return 0 if ratio <= MAX_RATIO and same else 1


if __name__ == "__main__":
    sys.exit(main())
