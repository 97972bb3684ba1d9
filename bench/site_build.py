"""Benchmark: the whole site of a real vLLM release, against plain mkdocs building as many pages.

Run from the project's checkout:

    .venv/bin/python bench/site_build.py --repo path/to/vllm-mirror --ref v0.33.0 [--cache-dir D]

It scans the release (from the scan cache after the first run; not timed), builds the knowledge
base as `vllm-errors build` does (annotators and curated notes, no LLM; timed apart), then
renders the pages and the JSON API and builds the site with mkdocs into a temporary directory:
that render + mkdocs time is "build seconds".

The reference, built in the same run, is plain `mkdocs build` with the same theme as our
mkdocs.yml (its name and options, without our template overrides) and the default search
plugin, of the same number of minimal pages (one heading and one paragraph each, kept out of
the nav). The ratios show what our content costs over mkdocs itself.

Exits 1 if the build takes 240 s or more (the target). "search index MB" is the whole index on disk: ours is
Pagefind's chunks (a reader fetches a few of them: bench/first_search.py measures that), the reference's the
one lunr index every reader downloads before a first result.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mkdocs.commands.build import build as mkdocs_build  # noqa: E402
from mkdocs.config import load_config  # noqa: E402

from vllm_errors import pipeline  # noqa: E402

MAX_BUILD_SECONDS = 240


def tree_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def search_index_bytes(site: Path) -> int:
    """Pagefind's index (ours) or mkdocs' search_index.json (the reference's), on disk."""
    if (site / "pagefind").is_dir():
        return tree_bytes(site / "pagefind")
    index = site / "search" / "search_index.json"
    return index.stat().st_size if index.is_file() else 0


def our_theme(config_file: Path) -> dict:
    """The `theme` section of our mkdocs.yml, without `custom_dir` (our overrides are our content)."""

    class Loader(yaml.SafeLoader):
        pass

    # mkdocs.yml may hold `!!python/name:` and `!ENV` tags; the theme section does not need them.
    Loader.add_multi_constructor("", lambda loader, suffix, node: None)
    theme = yaml.load(config_file.read_text(), Loader=Loader)["theme"]
    theme = {"name": theme} if isinstance(theme, str) else dict(theme)
    theme.pop("custom_dir", None)
    return theme


def reference_build(pages: int, theme: dict, work: Path) -> tuple[float, Path]:
    """Plain mkdocs: `pages` minimal pages out of the nav, the same theme, the default search plugin."""
    docs, site = work / "docs", work / "site"
    (docs / "p").mkdir(parents=True)
    (docs / "index.md").write_text("# Reference\n\nPlain mkdocs, for comparison.\n")
    for n in range(pages):
        (docs / "p" / f"{n}.md").write_text(f"# Page {n}\n\nOne paragraph of plain text for page {n}.\n")
    config_file = work / "mkdocs.yml"
    config = {
        "site_name": "reference",
        "docs_dir": str(docs),
        "site_dir": str(site),
        "theme": theme,
        "plugins": ["search"],
        "nav": ["index.md"],
        "not_in_nav": "/p/",
    }
    config_file.write_text(yaml.safe_dump(config))
    started = time.perf_counter()
    mkdocs_build(load_config(config_file=str(config_file)))
    return time.perf_counter() - started, site


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", required=True, help="local git repository of vLLM (a release mirror)")
    parser.add_argument("--ref", required=True, help="the release, e.g. v0.33.0")
    parser.add_argument("--cache-dir", type=Path, default=None, help="scan cache (default: vllm-errors' own)")
    args = parser.parse_args()

    scan = pipeline.ScanRequest(repo=args.repo, ref=args.ref, cache_dir=args.cache_dir or pipeline.default_cache_dir(), progress=False)
    catalog, stats = pipeline.scan_release(scan)
    print(f"scanned {pipeline.summary_line(catalog, stats)}")

    with tempfile.TemporaryDirectory(prefix="vllm-errors-bench-") as tmp:
        work = Path(tmp)
        started = time.perf_counter()
        kb, _, _ = pipeline.annotate_catalog(catalog)  # as `vllm-errors build` does, without the LLM
        kb_seconds = time.perf_counter() - started
        request = pipeline.BuildRequest(scan=scan, site_dir=work / "ours" / "site", docs_dir=work / "ours" / "docs")
        built = pipeline.build_site(kb, request)
        ours_site = tree_bytes(request.site_dir)
        ours_index = search_index_bytes(request.site_dir)

        ref_seconds, ref_site_dir = reference_build(built.pages, our_theme(request.config_file), work / "reference")
        ref_site = tree_bytes(ref_site_dir)
        ref_index = search_index_bytes(ref_site_dir)

    print(f"\n{args.ref}: {len(kb.records)} errors, {built.pages} pages, {built.api_files} API files, {built.warnings} mkdocs warnings")
    print(f"knowledge base: {kb_seconds:.1f} s (not counted in the build)")
    print(f"{'':18}{'ours':>10}{'mkdocs':>10}{'ratio':>8}")
    rows = [
        ("build seconds", built.seconds, ref_seconds),
        ("site MB", ours_site / 1e6, ref_site / 1e6),
        ("search index MB", ours_index / 1e6, ref_index / 1e6),
    ]
    for name, ours, ref in rows:
        ratio = f"{ours / ref:.2f}x" if ref else "-"
        print(f"{name:18}{ours:10.1f}{ref:10.1f}{ratio:>8}")

    missed = []
    if built.seconds >= MAX_BUILD_SECONDS:
        missed.append(f"build took {built.seconds:.0f} s (target: under {MAX_BUILD_SECONDS} s)")
    for line in missed:
        print(f"MISSED: {line}", file=sys.stderr)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
