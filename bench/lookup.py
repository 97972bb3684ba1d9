"""Lookup benchmark: synthetic pastes of every error of the newest release, and real pastes from public reports.

    .venv/bin/python bench/lookup.py --repo path/to/vllm-mirror [--since v0.4.1] [--until v0.33.0] [--cache-dir D] [--browser]

Scans (from the cache) every release tag of the mirror in the range, builds the knowledge base
with their history and its lookup index, as `vllm-errors update` does, then:

- synthetic: each template of the newest release filled with plausible values
  (`lookup.example_message`), pasted as `Type: message`, bare and behind log prefixes; beside it a
  reference, Python's `re` matching every catalog pattern in turn;
- real: the pastes of tests/lookup/pastes/ (bench/realpastes.py), recall@1 on the tuning half and on
  the held-back half, on pastes of older releases, the errors from outside vLLM, and the answers
  given with high confidence that are wrong; with --browser, the box's time per paste in headless
  Chromium (the same index, site/assets/lookup.js).

Exit 1 when the held-back half misses a target: recall@1 >= 90 %, >= 85 % on older releases,
no wrong answer with high confidence, every paste from outside vLLM answered as not vLLM's.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import realpastes  # noqa: E402

from vllm_errors import lookup, pipeline, source  # noqa: E402
from vllm_errors.history import build_history, covering_catalog  # noqa: E402

PREFIX = "(EngineCore_DP0 pid=37512) ERROR 05-06 01:55:26 [core.py:383] "


def synthetic(index: dict) -> list[tuple[str, str, str]]:
    """(expected id, kind of paste, text) for every error of the newest release that has a message."""
    newest = len(index["releases"]) - 1
    out = []
    for error in index["errors"]:
        if not error["p"] or not error["t"] or not any(b == newest for _, b in error["r"]):
            continue
        line = f"{error['t'][0]}: {lookup.example_message(error['p'])}"
        out.append((error["i"], "bare", line))
        out.append((error["i"], "prefixed", "\n".join(PREFIX + row for row in line.split("\n"))))
    return out


PHONE_SLOWDOWN = 6  # Chromium's CPU throttling for a mid-range phone, as its DevTools offer it


def box_times(index: dict, pastes: list[str], slowdown: int = 1) -> tuple[float, list[float]] | None:
    """Seconds to prepare the index and per paste of site/assets/lookup.js in headless Chromium, its CPU
    slowed down `slowdown` times; None without Chromium or Playwright."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not Path("/usr/bin/chromium").exists():
        return None
    import functools
    import shutil
    import tempfile
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    root = Path(tempfile.mkdtemp())
    (root / "assets").mkdir()
    shutil.copy(realpastes.ROOT / "site" / "assets" / "lookup.js", root / "assets" / "lookup.js")
    (root / "bench.html").write_text('<!doctype html><meta charset=utf-8><script type=module>'
                                     'import * as lookup from "./assets/lookup.js"; window.veLookup = lookup;</script>')
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{server.server_address[1]}/bench.html")
        page.wait_for_function("window.veLookup !== undefined")
        page.context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate", {"rate": slowdown})
        prepare, times = page.evaluate(
            """([text, pastes]) => {
                let started = performance.now();
                const prepared = window.veLookup.prepare(JSON.parse(text));
                const prepare = (performance.now() - started) / 1000;
                return [prepare, pastes.map((paste) => {
                    started = performance.now();
                    window.veLookup.answer(prepared, window.veLookup.readPaste(paste));
                    return (performance.now() - started) / 1000;
                })];
            }""",
            [json.dumps(index), pastes],
        )
        browser.close()
    server.shutdown()
    shutil.rmtree(root)
    return prepare, times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repo", required=True)
    parser.add_argument("--since", default=None, help="the oldest release tag (default: the mirror's oldest)")
    parser.add_argument("--until", default=None, help="the newest release tag (default: the mirror's newest)")
    parser.add_argument("--cache-dir", type=Path, default=pipeline.default_cache_dir())
    parser.add_argument("--browser", action="store_true", help="also time the box in headless Chromium")
    args = parser.parse_args()

    tags = source.select_releases(source.release_tags(Path(args.repo)), since=args.since or "v0.0.0", until=args.until)
    started = time.perf_counter()
    catalogs = [pipeline.scan_release(pipeline.ScanRequest(repo=args.repo, ref=t, cache_dir=args.cache_dir, progress=False))[0] for t in tags]
    history = build_history(catalogs)
    catalog, snapshots = covering_catalog(catalogs)
    kb, _, _ = pipeline.annotate_catalog(catalog, history=history, snapshots=snapshots)
    index = lookup.build_index(kb)
    print(f"{len(tags)} releases {tags[0]} – {tags[-1]}: {len(index['errors'])} errors in the index, "
          f"{len(json.dumps(index, separators=(',', ':'))) / 1e6:.1f} MB ({time.perf_counter() - started:.0f} s to build)")
    prepared = lookup.prepare(index)

    cases = synthetic(index)
    first: Counter = Counter()
    started = time.perf_counter()
    for expected, kind, text in cases:
        found = lookup.rank(prepared, lookup.read_paste(text))
        first[kind] += bool(found and found[0].id == expected)
    ours = (time.perf_counter() - started) / len(cases)
    patterns = [(e.id, re.compile(e.pattern, re.S)) for e in catalogs[-1].errors if e.pattern]
    sample = cases[::100]  # the reference tries every pattern on each paste: 1 bare paste in 50
    ref_first, started = 0, time.perf_counter()
    for expected, _, text in sample:
        hits = [i for i, p in patterns if p.fullmatch(text.split(": ", 1)[1])]
        ref_first += bool(hits) and hits[0] == expected
    reference = (time.perf_counter() - started) / len(sample)
    for kind in ("bare", "prefixed"):
        total = sum(1 for _, k, _ in cases if k == kind)
        print(f"synthetic {kind:>8}: right error first for {first[kind]} of {total} ({first[kind] / total:.2%})")
    print(f"synthetic reference (re.fullmatch of every pattern, 1 bare paste in 50): {ref_first} of {len(sample)} ({ref_first / len(sample):.2%})")
    print(f"synthetic time per paste: ours {ours * 1000:.1f} ms, reference {reference * 1000:.1f} ms, ratio {ours / reference:.2f}")

    real = realpastes.load_cases()
    wanted = {c.expect["release"] for c in real if "release" in c.expect}
    by_ref = {c.snapshot.ref: c for c in catalogs}
    missing = sorted(wanted - by_ref.keys())
    if missing:
        print(f"real pastes name releases outside the range, their cases count as misses: {', '.join(missing)}")
    tallies, times = realpastes.evaluate(prepared, real, by_ref, tags[-1])
    for name in ("tune", "held-back", "all"):
        print(tallies[name].line(f"real, {name}") if name in tallies else f"real, {name}: none (every collection was measured and read: gather a new one)")
    print(f"real, CLI: {realpastes.timing_line(times)}")
    if args.browser:
        for slowdown, what in ((1, "box in Chromium"), (PHONE_SLOWDOWN, f"box in Chromium, CPU {PHONE_SLOWDOWN}x slower (a phone)")):
            box = box_times(index, [c.paste for c in real], slowdown)
            if box is None:
                print("real, box: no Chromium or Playwright here")
                break
            print(f"real, {what}: parse and prepare the index {box[0]:.2f} s; {realpastes.timing_line(box[1])}")
    held = tallies.get("held-back")
    ok = held is not None and (
        held.right / held.cases >= 0.90
        and held.older_right / max(1, held.older) >= 0.85
        and held.high_wrong == 0
        and held.outside_right == held.outside
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
