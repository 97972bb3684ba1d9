"""Real pastes from public vLLM issue reports (tests/lookup/real_pastes.json), looked up in the index of v0.33.0.

Each entry keeps only what the user pasted of the error (log prefixes, frame lines, the exception lines) and
names the 0.33.0 template it is an instance of. Entries marked "known_miss" are real pastes the lookup does not
rank first today; they xfail strictly, so fixing the lookup turns them into failures to be unmarked.
Needs a release mirror with tag v0.33.0: set VLLM_ERRORS_MIRROR (and VLLM_ERRORS_CACHE to reuse scans).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pytest

from extractor import lookup, pipeline

pytestmark = pytest.mark.real

MIRROR = os.environ.get("VLLM_ERRORS_MIRROR")
PASTES = json.loads((Path(__file__).parent / "lookup" / "real_pastes.json").read_text())


def slug(source: str) -> str:
    """https://github.com/vllm-project/vllm/issues/13510 -> vllm-13510; .../google/tunix/pull/222 -> tunix-pr222."""
    owner_repo, kind, number = re.search(r"github\.com/[^/]+/([^/]+)/(issues|pull)/(\d+)", source).groups()
    return f"{owner_repo}-{'pr' if kind == 'pull' else ''}{number}"


def ids() -> list[str]:
    seen: Counter = Counter()
    out = []
    for case in PASTES:
        name = slug(case["source"])
        seen[name] += 1
        out.append(name if seen[name] == 1 else f"{name}-{seen[name]}")
    return out


def params() -> list:
    return [
        pytest.param(case, id=name, marks=[pytest.mark.xfail(strict=True, reason=case["known_miss"])] if "known_miss" in case else [])
        for case, name in zip(PASTES, ids())
    ]


# What a paste looks like, beyond the message itself: each paste may show several of these.
SHAPES = {
    "frames": re.compile(r'File "[^"]+", line \d+, in '),
    "pydantic wrapper": re.compile(r"validation error for \w+|^\W*Value error, ", re.M),
    "vllm log prefix": re.compile(r"(?:ERROR|INFO|WARNING) \d\d-\d\d \d\d:\d\d:\d\d"),
    "process prefix": re.compile(r"\([\w-]+(?: [\w-]+)? pid=\d+\)"),
    "rank prefix": re.compile(r"^\[rank\d+\]:", re.M),
    "timestamp prefix": re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d", re.M),
    "ci column": re.compile(r"^\s+\| ", re.M),
    "qualified exception type": re.compile(r"^\W*(?:[a-z_]\w*\.)+[A-Z]\w*(?:Error|Exception):", re.M),
}
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception): ")
# Any of the prefixes above, old log format included, so the shapes do not depend on what the lookup strips.
LINE_PREFIX = re.compile(
    r"^\s*(?:\|\s*|\([\w-]+(?: [\w-]+)? pid=\d+\)\s*|\[rank\d+\]:\s*|\d{4}-\d\d-\d\d[T ][\d:.]+\s*\|?\s*"
    r"|(?:DEBUG|INFO|WARNING|ERROR)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[?[^\]\s]*\]\s*)+"
)


def shapes(paste: str) -> set[str]:
    found = {name for name, pattern in SHAPES.items() if pattern.search(paste)}
    lines = [LINE_PREFIX.sub("", line).strip() for line in paste.strip().splitlines()]
    lines = [line for line in lines if line]
    raised = [i for i, line in enumerate(lines) if EXCEPTION_LINE.match(line)]
    if not raised and "pydantic wrapper" not in found:
        found.add("bare message")
    elif len(lines) == 1 and raised:
        found.add("one exception line")
    if raised and any(not line.startswith(("File ", "For further information")) for line in lines[raised[-1] + 1 :]):
        found.add("multi-line message")
    return found


def subsystem(path: str) -> str:
    """vllm/model_executor/layers/quantization/... -> model_executor/layers; vllm/sampling_params.py -> sampling_params."""
    parts = path.removeprefix("vllm/").removesuffix(".py").split("/")
    return "/".join(parts[:2]) if parts[0] in ("v1", "model_executor") else parts[0]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    if not MIRROR:
        pytest.skip("VLLM_ERRORS_MIRROR names no release mirror")
    cache = Path(os.environ.get("VLLM_ERRORS_CACHE") or tmp_path_factory.getbasetemp() / "cache")
    catalog, _ = pipeline.scan_release(pipeline.ScanRequest(repo=MIRROR, ref="v0.33.0", cache_dir=cache, progress=False))
    kb, _, _ = pipeline.annotate_catalog(catalog)
    index = lookup.build_index(kb)
    by_template: dict[str, list] = {}
    for error in catalog.errors:
        if error.template:
            by_template.setdefault(error.template, []).append(error)
    return by_template, lookup.prepare(index)


def test_every_paste_names_an_error_of_the_release(release):
    by_template, _ = release
    for case, name in zip(PASTES, ids()):
        errors = by_template.get(case["template"])
        assert errors, f"{name}: no 0.33.0 error has the template {case['template']!r}"
        assert case["exception"] in {e.exception for e in errors}, f"{name}: {case['exception']} is not the catalog's exception"


@pytest.mark.parametrize("case", params())
def test_paste_finds_its_error_first(release, case):
    by_template, entries = release
    expected = {e.id for e in by_template.get(case["template"], [])}
    found = lookup.rank(entries, lookup.read_paste(case["paste"]))
    top = [(m.id, m.score, m.how) for m in found[:3]]
    assert found and found[0].id in expected, f"expected one of {sorted(expected)}, got {top}"


def test_the_set_is_large_and_varied(release):
    by_template, _ = release
    assert len(PASTES) >= 20
    assert len({case["source"] for case in PASTES}) == len(PASTES), "one paste per report"
    subsystems = {subsystem(site.path) for case in PASTES for e in by_template[case["template"]] for site in e.sites[:1]}
    seen_shapes = set().union(*(shapes(case["paste"]) for case in PASTES))
    assert len(subsystems) >= 8, sorted(subsystems)
    assert len(seen_shapes) >= 8, sorted(seen_shapes)
    assert sum("known_miss" not in case for case in PASTES) >= 20, "most real pastes must be found"
