"""Lookup benchmark: every error of a release, pasted as users paste it, looked up.

    .venv/bin/python bench/lookup.py --repo path/to/vllm-mirror --ref v0.33.0 [--cache-dir D]

Each template is filled with plausible values (`lookup.example_message`) and pasted as
`Type: message`, bare and behind log prefixes. It prints how often the right error comes
first, the misses grouped by kind, and the time per paste, beside a reference: Python's `re`
matching every catalog pattern in turn (what a plain regex search over the templates does).
Exit 1 when fewer than 98 % come first or a paste takes 50 ms or more on average.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter
from pathlib import Path

from extractor import lookup, pipeline

PREFIX = "(EngineCore_DP0 pid=37512) ERROR 05-06 01:55:26 [core.py:383] "


def pastes(index: dict) -> list[tuple[str, str, str]]:
    """(expected id, kind of paste, text) for every error that has a message."""
    out = []
    for error in index["errors"]:
        if not error["p"] or not error["t"]:
            continue
        message = lookup.example_message(error["p"])
        line = f"{error['t'][0]}: {message}"
        out.append((error["i"], "bare", line))
        out.append((error["i"], "prefixed", "\n".join(PREFIX + row for row in line.split("\n"))))
    return out


def miss_kind(index: dict, expected: str, found: list) -> str:
    if not found:
        return "no match"
    if any(m.id == expected for m in found):
        best = found[0]
        mine = next(m for m in found if m.id == expected)
        return "tie with another template" if mine.score == best.score else "ranked below another template"
    return "not among the top 5"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--ref", required=True)
    parser.add_argument("--cache-dir", type=Path, default=pipeline.default_cache_dir())
    args = parser.parse_args()
    catalog, _ = pipeline.scan_release(pipeline.ScanRequest(repo=args.repo, ref=args.ref, cache_dir=args.cache_dir, progress=False))
    kb, _, _ = pipeline.annotate_catalog(catalog)
    index = lookup.build_index(kb)
    entries = lookup.prepare(index)
    cases = pastes(index)

    first, misses, started = Counter(), Counter(), time.perf_counter()
    examples: dict[str, list[str]] = {}
    for expected, kind, text in cases:
        found = lookup.rank(entries, lookup.read_paste(text))
        if found and found[0].id == expected:
            first[kind] += 1
        else:
            why = miss_kind(index, expected, found)
            misses[why] += 1
            examples.setdefault(why, []).append(text.split("\n")[0][:140])
    ours = (time.perf_counter() - started) / len(cases)

    patterns = [(e.id, re.compile(e.pattern, re.S)) for e in catalog.errors if e.pattern]
    by_id = {e["i"]: e for e in index["errors"]}
    ref_first, started = 0, time.perf_counter()
    sample = cases[::20]  # every 10th error, bare: the reference tries every pattern on each paste
    for expected, kind, text in sample:
        message = text.split(": ", 1)[1]
        hits = [i for i, p in patterns if p.fullmatch(message)]
        ref_first += bool(hits) and hits[0] == expected
    reference = (time.perf_counter() - started) / len(sample)

    total = {kind: sum(1 for _, k, _ in cases if k == kind) for kind in ("bare", "prefixed")}
    for kind in total:
        print(f"{kind:>9}: right error first for {first[kind]} of {total[kind]} ({first[kind] / total[kind]:.2%})")
    print(f"reference (re.fullmatch of every pattern, 1 bare paste in 10): right error first for {ref_first} of {len(sample)} ({ref_first / len(sample):.2%})")
    print(f"time per paste: ours {ours * 1000:.1f} ms, reference {reference * 1000:.1f} ms, ratio {ours / reference:.2f}")
    print(f"errors in the index: {len(by_id)}; with a message to paste: {total['bare']}")
    for why, count in misses.most_common():
        print(f"\nmisses: {why}: {count}")
        for text in examples[why][:8]:
            print(f"  {text}")
    rate = sum(first.values()) / len(cases)
    return 0 if rate >= 0.98 and ours < 0.050 else 1


if __name__ == "__main__":
    sys.exit(main())
