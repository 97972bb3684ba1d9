"""Cold scan speed of one release, against a reference in the same run: `griffe dump` of the same tree.

    .venv/bin/pip install griffe
    .venv/bin/python bench/scan_speed.py --repo path/to/vllm-mirror [--ref v0.33.0]

griffe (mkdocstrings' loader) parses every module of the package with the stdlib parser and
dumps its API as JSON: what any docs tool pays to read vLLM. The scan reads the release's blobs from
git and scans them with libcst, one process per core, into an empty cache. Prints both times and
their ratio (lower is better for the scan).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from vllm_errors import pipeline  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--ref", default="v0.33.0")
    args = parser.parse_args()
    griffe = shutil.which("griffe") or str(Path(sys.executable).parent / "griffe")
    if not Path(griffe).exists():
        print("griffe is not installed: pip install griffe", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "tree"
        tree.mkdir()
        archive = subprocess.run(["git", "-C", args.repo, "archive", "--format=tar", args.ref, "vllm"], check=True, capture_output=True).stdout
        (Path(tmp) / "tree.tar").write_bytes(archive)
        with tarfile.open(Path(tmp) / "tree.tar") as tar:
            tar.extractall(tree, filter="data")
        started = time.perf_counter()
        subprocess.run([griffe, "dump", "vllm", "-s", str(tree), "-o", str(Path(tmp) / "griffe.json")], check=True, capture_output=True)
        reference = time.perf_counter() - started
        started = time.perf_counter()
        catalog, _ = pipeline.scan_release(pipeline.ScanRequest(repo=args.repo, ref=args.ref, cache_dir=Path(tmp) / "cache", progress=False))
        ours = time.perf_counter() - started
    print(f"{args.ref}: {catalog.files} files, {len(catalog.errors)} errors")
    print(f"cold scan {ours:.1f} s, griffe dump {reference:.1f} s, ratio {ours / reference:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
