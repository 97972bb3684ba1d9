"""Benchmark: what the vLLM plugin costs, against the same logging without it (the reference), in one run.

    .venv/bin/python bench/plugin_overhead.py [--records 200000] [--bundle extractor/bundle]

The hot path: vLLM logs through its `vllm` logger at INFO and DEBUG while it serves; the plugin's handler sits on
that logger at level ERROR. Timed: N INFO records through a `vllm` logger configured as vLLM configures it (one
stream handler to an in-memory stream, propagation off), without the plugin and with it registered; printed:
microseconds per record and the ratio. The fatal path, timed apart: the first and a later line for an
exception vLLM raises (loading the bundle, then the lookup), which runs only when an exception is on its way out.

Exits 1 if the plugin makes a record more than 5 % slower.
"""

from __future__ import annotations

import argparse
import io
import logging
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

MAX_RATIO = 1.05


def per_record(logger: logging.Logger, records: int, repeats: int = 5) -> float:
    """Median microseconds per INFO record over `repeats` runs."""
    runs = []
    for _ in range(repeats):
        started = time.perf_counter()
        for n in range(records):
            logger.info("Avg prompt throughput: %d tokens/s", n)
        runs.append((time.perf_counter() - started) / records * 1e6)
    return statistics.median(runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--bundle", type=Path, default=None, help="a bundle's folder (default: the one this install carries)")
    args = parser.parse_args()
    if args.bundle:
        os.environ["VLLM_ERRORS_BUNDLE"] = str(args.bundle)

    root = logging.getLogger("vllm")
    root.addHandler(logging.StreamHandler(io.StringIO()))
    root.setLevel(logging.INFO)
    root.propagate = False
    logger = logging.getLogger("vllm.v1.metrics.loggers")

    without = per_record(logger, args.records)
    from vllm_errors import plugin

    plugin.register()
    with_plugin = per_record(logger, args.records)
    ratio = with_plugin / without
    print(f"INFO record through vLLM's logger: {without:.2f} us without the plugin, {with_plugin:.2f} us with it ({ratio:.3f}x)")

    for label in ("first", "later"):
        try:
            raise ValueError("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine.")
        except ValueError as e:
            started = time.perf_counter()
            line = plugin.line_for(e)
            print(f"{label} fatal line: {(time.perf_counter() - started) * 1000:.0f} ms: {line}")
    if ratio > MAX_RATIO:
        print(f"target missed: the plugin makes a record {ratio:.3f}x slower (> {MAX_RATIO}x)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
