"""Blind review of sampled error pages against vLLM's source: the packets reviewers read, and the tally of their verdicts.

    .venv/bin/python bench/review.py sample --site build/site --out build/review [--n 30] [--seed 12]
    .venv/bin/python bench/review.py sample --site build/site --out build/review-after --like build/review/sample.json
    .venv/bin/python bench/review.py sample --site build/site --out build/review-reported --n 20 --reported 40 [--seed 1]
    .venv/bin/python bench/review.py tally build/review

`sample` draws n errors of the site's newest release with a fixed seed and writes, per error, a packet
(`<id>.md`): what the page says (meaning, triggers, solutions, example fix, kind) and where the error is
raised, with the source lines to read (`git show <tag>:<path>`). Reviewers who have not seen this
project read each packet against vLLM's source of that release and write `<id>.verdict.json`:

    {"id": "...", "trigger_correct": true, "solutions_are_levers": false, "stops_the_raise": false,
     "invented": ["..."], "meaning_adds": false, "kind_correct": true, "usefulness": 2, "notes": "..."}

- trigger_correct: the page's trigger says when the raise happens, truly;
- solutions_are_levers: every solution names something the user controls (a flag, a JSON config key, an
  environment variable, a request field, the checkpoint, the hardware), none a variable of vLLM's;
- stops_the_raise: following any one solution stops this raise;
- invented: each statement of the page that the source contradicts or does not support;
- meaning_adds: "what it means" says more than the message does;
- kind_correct: user / internal / unknown as the source shows it (an internal invariant is internal);
- usefulness: 1 (misleading) to 5 (what a vLLM engineer would tell the user).

`tally` prints the figures issue 12 sets targets on: the share of pages correct and actionable (trigger
correct, solutions levers that stop the raise, nothing invented, a meaning that adds), invented facts,
internal errors labelled so, and the mean usefulness.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from pathlib import Path

FIELDS = ("trigger_correct", "solutions_are_levers", "stops_the_raise", "invented", "meaning_adds", "kind_correct", "usefulness")


def newest_ids(site: Path) -> tuple[str, list[str]]:
    """The newest release's tag and its errors' ids, sorted."""
    index = json.loads((site / "api" / "errors.json").read_text(encoding="utf-8"))
    newest = index["snapshot"]["ref"]
    ids = []
    for entry in index["errors"]:
        record = json.loads((site / "api" / "errors" / f"{entry['id']}.json").read_text(encoding="utf-8"))
        releases = (record.get("history") or {}).get("releases") or [{"ref": newest}]
        if releases[-1]["ref"] == newest:
            ids.append(entry["id"])
    return newest, sorted(ids)


def packet(record: dict, tag: str) -> str:
    """What a reviewer reads for one error: the page's claims, and where to check them."""
    a = record["annotation"]
    out = [f"# {record['id']}: {record['title']}", "", f"Release: {tag}. Exception: `{record['exception']}`. Kind on the page: {a['kind']}.", ""]
    out += ["## What the page says", "", "What it means:", "", a.get("meaning") or "(nothing)", ""]
    for name, title in (("triggers", "Triggers"), ("situations", "Common situations"), ("solutions", "Solutions")):
        out += [f"{title}:", ""] + ([f"- {x}" for x in a.get(name) or []] or ["(none)"]) + [""]
    if a["kind"] == "internal":  # the page's own section for internal errors, after the solutions
        out += ["Report this to vLLM (a section every internal error's page has):", "",
                "This check guards an assumption inside vLLM, so there is usually nothing to change in your setup: it most "
                "likely means a bug. Open an issue on vLLM with the full traceback, how you started vLLM, the release and "
                "your GPU and driver.", ""]
    fix = a.get("example_fix")
    out += ["Example fix:", "", f"before: {fix['before']}\nafter:  {fix['after']}" if fix else "(none)", ""]
    if record.get("reports"):
        out += ["Public reports listed on the page (check them with the issue search):", ""]
        out += [f"- {r['url']}: {r['title']}" + (f" (vLLM {r['version']})" if r.get("version") else "")
                + (f"; in the thread: {r['resolution']}" if r.get("resolution") else "") for r in record["reports"]] + [""]
    out += ["## Where it is raised", ""]
    for site in record["sites"]:
        start, end = max(1, site["line"] - 40), site["end_line"] + 5
        out.append(f"- `{site['path']}:{site['line']}` in `{site['function']}`: "
                   f"`git show {tag}:{site['path']} | sed -n {start},{end}p` (and follow its callers: `git grep -n {site['function'].split('.')[-1]} {tag} -- vllm/`)")
    return "\n".join(out) + "\n"


def sample(args: argparse.Namespace) -> int:
    tag, ids = newest_ids(args.site)
    if args.like:  # the errors of an earlier sample, to review the same pages again after a change
        chosen = [i for i in json.loads(args.like.read_text(encoding="utf-8"))["ids"] if i in set(ids)]
    elif args.reported:  # the errors people report most: drawn from the `reported` most reported of the newest release
        counts = {i: len(json.loads((args.site / "api" / "errors" / f"{i}.json").read_text(encoding="utf-8")).get("reports") or ()) for i in ids}
        seen = {i for f in args.exclude or () for i in json.loads(f.read_text(encoding="utf-8"))["ids"]}
        pool = sorted((i for i in ids if counts[i] and i not in seen), key=lambda i: (-counts[i], i))[: args.reported]
        chosen = random.Random(args.seed).sample(pool, min(args.n, len(pool)))
    else:
        chosen = random.Random(args.seed).sample(ids, min(args.n, len(ids)))
    args.out.mkdir(parents=True, exist_ok=True)
    kinds = {}
    for error_id in chosen:
        record = json.loads((args.site / "api" / "errors" / f"{error_id}.json").read_text(encoding="utf-8"))
        (args.out / f"{error_id}.md").write_text(packet(record, tag), encoding="utf-8")
        kinds[error_id] = record["annotation"]["kind"]
    sampled = {"release": tag, "seed": args.seed, "ids": chosen, "kinds": kinds}
    (args.out / "sample.json").write_text(json.dumps(sampled, indent=1) + "\n", encoding="utf-8")
    print(f"{len(chosen)} packets of {tag} (seed {args.seed}, from {len(ids)} errors) in {args.out}")
    return 0


def tally(args: argparse.Namespace) -> int:
    if not (args.dir / "sample.json").is_file():
        print(f"review: {args.dir} holds no sample.json; make one with `review.py sample --out {args.dir}`", file=sys.stderr)
        return 2
    sampled = json.loads((args.dir / "sample.json").read_text(encoding="utf-8"))
    chosen = sampled["ids"]
    verdicts, missing = [], []
    for error_id in chosen:
        path = args.dir / f"{error_id}.verdict.json"
        if not path.exists():
            missing.append(error_id)
            continue
        verdict = json.loads(path.read_text(encoding="utf-8"))
        absent = [f for f in FIELDS if f not in verdict]
        if absent:
            print(f"{path.name}: missing {', '.join(absent)}", file=sys.stderr)
            return 2
        verdicts.append((verdict, sampled["kinds"][error_id]))
    if not verdicts:
        print("no verdicts yet", file=sys.stderr)
        return 2
    n = len(verdicts)
    good = sum(1 for v, _ in verdicts if v["trigger_correct"] and v["solutions_are_levers"] and v["stops_the_raise"] and not v["invented"] and v["meaning_adds"])
    invented = sum(len(v["invented"]) for v, _ in verdicts)
    internal = [(v, kind) for v, kind in verdicts if kind == "internal" or not v["kind_correct"]]
    print(f"pages reviewed: {n} of {len(chosen)}" + (f" ({len(missing)} without a verdict)" if missing else ""))
    print(f"correct and actionable: {good} ({good / n:.0%}); trigger correct: {sum(v['trigger_correct'] for v, _ in verdicts)}; "
          f"solutions are levers: {sum(v['solutions_are_levers'] for v, _ in verdicts)}; stop the raise: {sum(v['stops_the_raise'] for v, _ in verdicts)}; "
          f"meaning adds: {sum(v['meaning_adds'] for v, _ in verdicts)}")
    print(f"invented facts: {invented} on {sum(1 for v, _ in verdicts if v['invented'])} pages; kind right: {sum(v['kind_correct'] for v, _ in verdicts)} "
          f"(labelled internal: {sum(1 for _, kind in verdicts if kind == 'internal')}, kind wrong: {sum(1 for v, _ in internal if not v['kind_correct'])})")
    print(f"usefulness: mean {statistics.mean(v['usefulness'] for v, _ in verdicts):.1f} of 5")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("sample")
    s.add_argument("--site", type=Path, default=Path("build/site"))
    s.add_argument("--out", type=Path, default=Path("build/review"))
    s.add_argument("--n", type=int, default=30)
    s.add_argument("--seed", type=int, default=12)
    s.add_argument("--like", type=Path, help="an earlier sample.json: the same errors, those the site still has")
    s.add_argument("--exclude", type=Path, action="append", help="with --reported: an earlier sample.json whose errors are left out (a fresh draw)")
    s.add_argument("--reported", type=int, default=0, metavar="POOL", help="draw from the POOL most reported errors of the newest release instead")
    t = commands.add_parser("tally")
    t.add_argument("dir", type=Path)
    args = parser.parse_args(argv)
    return sample(args) if args.command == "sample" else tally(args)


if __name__ == "__main__":
    sys.exit(main())
