"""Real pastes from public issue reports (tests/lookup/pastes/): the collection, its two halves, and how the lookup answers them.

Each case is one report: the text as pasted, the vLLM version the reporter ran, and where the error
really came from, checked against that release's source: `{"release": "v0.8.5", "path": ...,
"line": N, "exception": ...}` (the root cause, when the paste holds several errors), or
`{"outside": "torch"}` for an error vLLM's code does not raise.

The cases split in two: the tuning half, which the lookup may be tuned on, and the held-back half,
which is only ever measured. The held-back half is the newest collection (`fresh*_*.json`; none
now: the twelfth, `round12_*.json`, was the last), gathered by people who never ran the lookup, from
reports in none of the others; once measured and reported, a collection joins the tuning half
(`round2_*.json` to `round12_*.json`: each measured once, then read) and a new one is gathered.
The first collection (the topic files) was split by a hash of each source address; its held-back
half's totals were measured a few times, then its misses read.
"""

from __future__ import annotations

import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from vllm_errors import lookup
from vllm_errors.model import Catalog

ROOT = Path(__file__).resolve().parent.parent
PASTES_DIR = ROOT / "tests" / "lookup" / "pastes"


@dataclass(frozen=True)
class Case:
    source: str  # the public report
    paste: str
    version: str | None  # what the reporter ran, where the thread says
    expect: dict  # release/path/line/exception, or outside
    topic: str  # the file it comes from
    half: str  # "tune" or "held-back"
    # Raised outside vLLM with a message vLLM's own code also has word for word (a plugin or library that copied
    # it), and pasted without a traceback: no paste-reading can tell it from vLLM's, checked by the collector.
    same_words: bool = False

    @property
    def outside(self) -> bool:
        return "outside" in self.expect


def half_of(topic: str) -> str:
    return "held-back" if topic.startswith("fresh") else "tune"


def load_cases() -> list[Case]:
    cases, seen = [], set()
    for path in sorted(PASTES_DIR.glob("*.json")):
        for item in json.loads(path.read_text(encoding="utf-8")):
            if item["source"] in seen:
                continue
            seen.add(item["source"])
            cases.append(Case(item["source"], item["paste"], item.get("version"), item["expect"], path.stem, half_of(path.stem),
                              bool(item.get("same_words_in_vllm"))))
    return cases


def expected_id(case: Case, catalogs: dict[str, Catalog]) -> str | None:
    """The id of the error a case names, in the catalog of the release it names; None when it names none there."""
    catalog = catalogs.get(case.expect.get("release", ""))
    if catalog is None or case.outside:
        return None
    path, line = case.expect["path"], case.expect["line"]
    return next((e.id for e in catalog.errors for s in e.sites if s.path == path and s.line <= line <= max(s.end_line, s.line)), None)


@dataclass
class Tally:
    cases: int = 0
    right: int = 0
    high_wrong: int = 0
    high_wrong_same_words: int = 0  # of those, cases whose message vLLM also has word for word (Case.same_words)
    outside: int = 0
    outside_named: int = 0  # of the outside cases, those answered as a named outside error
    outside_right: int = 0  # answered "not a vLLM error" (named, or no match)
    older: int = 0
    older_right: int = 0
    misses: list = field(default_factory=list)

    def line(self, name: str) -> str:
        vllm = self.cases - self.outside
        return (
            f"{name}: {self.right}/{self.cases} right first ({self.right / max(1, self.cases):.1%}); "
            f"vLLM errors {self.right - self.outside_right}/{vllm}, of older releases {self.older_right}/{self.older} "
            f"({self.older_right / max(1, self.older):.1%}); not vLLM's {self.outside_right}/{self.outside} "
            f"({self.outside_named} named); wrong with high confidence: {self.high_wrong}"
            + (f" ({self.high_wrong_same_words} of them a message vLLM has word for word, pasted without a traceback)"
               if self.high_wrong_same_words else "")
        )


def judge(case: Case, answer: lookup.Answer, want: str | None, templateless: bool = False) -> tuple[bool, bool]:
    """(right, wrong with high confidence).

    A bare `assert` (no message) is no error of the catalog: the answer names the assert's file and line,
    which must be those the case names, or the assert it found by its expression must be at that line in
    the case's release. Where the site re-raises an exception built elsewhere (`raise self._format_exception(e)`), it has no
    message of its own: the error whose message and type the paste shows exactly is the page to land on.
    """
    found = answer.finding
    top = found.matches[0] if found and found.matches and found.kind in ("vllm", "wrapper") else None
    if case.outside:
        return answer.kind in ("outside", "none"), bool(top and top.confidence == "high")
    if found and found.kind == "assert":  # a bare assert has no page: the answer names its site, which must be the one
        where, want_at = found.assertion, (case.expect["path"], case.expect["line"])
        in_release = (case.expect["release"], case.expect["line"]) in found.lines and where.path == case.expect["path"]
        return (where.path, where.line) == want_at or in_release, False
    right = bool(top and (top.id == want or templateless and top.how == "exact" and top.type_agrees))
    return right, bool(top and not right and top.confidence == "high")


def evaluate(prepared: lookup.Prepared, cases: list[Case], catalogs: dict[str, Catalog], newest: str) -> tuple[dict[str, Tally], list[float]]:
    tallies: dict[str, Tally] = {}
    times = []
    for case in cases:
        want = expected_id(case, catalogs)
        templateless = bool(want) and not next(e for e in catalogs[case.expect["release"]].errors if e.id == want).template
        started = time.perf_counter()
        answer = lookup.answer(prepared, lookup.read_paste(case.paste))
        times.append(time.perf_counter() - started)
        right, high_wrong = judge(case, answer, want, templateless)
        for name in (case.half, "all"):
            t = tallies.setdefault(name, Tally())
            t.cases += 1
            t.right += right
            t.high_wrong += high_wrong
            t.high_wrong_same_words += high_wrong and case.same_words
            if case.outside:
                t.outside += 1
                t.outside_right += right
                t.outside_named += answer.kind == "outside"
            elif case.expect.get("release") != newest:
                t.older += 1
                t.older_right += right
            if not right and name == case.half:
                top = answer.finding.matches[0] if answer.finding and answer.finding.matches else None
                t.misses.append((case, want, answer.kind, top))
    return tallies, times


def timing_line(times: list[float]) -> str:
    return f"time per paste: median {statistics.median(times) * 1000:.1f} ms, worst {max(times) * 1000:.1f} ms"
