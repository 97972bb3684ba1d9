"""Looking up a pasted error: the shared vectors (here and through node), each paste shape, junk, and `vllm-errors explain`.

The vectors in tests/lookup/vectors.json hold what extractor/lookup.py reads and answers for each paste;
site/assets/lookup.js must give the same (tests/lookup/run_vectors.mjs). After a deliberate change:

    UPDATE_VECTORS=1 .venv/bin/pytest tests/test_lookup.py -k vectors

which also recomputes the index's word weights ("v") and the constants the JavaScript must share.
"""

from __future__ import annotations

import io
from dataclasses import replace
import json
import os
import random
import shutil
import string
import subprocess
import time
from pathlib import Path

import pytest

from vllm_errors import lookup
from vllm_errors.cli import main
from fixture_repo import make_repo

VECTORS_FILE = Path(__file__).parent / "lookup" / "vectors.json"
VECTORS = json.loads(VECTORS_FILE.read_text(encoding="utf-8"))
PREPARED = lookup.prepare(VECTORS["index"])
UPDATE = bool(os.environ.get("UPDATE_VECTORS"))
# lookup.py's constants of plain values (RARE, ENOUGH, CONFIDENT, EXACTLY, ...): lookup.js declares each under
# the same name, and run_vectors.mjs checks that the values agree.
CONSTANTS = sorted(name for name, value in vars(lookup).items() if name.isupper() and not name.startswith("_")
                   and json.loads(json.dumps(value, default=str)) == (list(value) if isinstance(value, tuple) else value))
CASES = {c["name"]: c for c in VECTORS["cases"]}


def paste_of(case: dict) -> str:
    """A case's paste: a string, or [text, times] pieces (long pastes stay short in the file)."""
    paste = case["paste"]
    return paste if isinstance(paste, str) else "".join(text * times for text, times in paste)


def answer_of(prepared: lookup.Prepared, case: dict) -> tuple[lookup.Paste, lookup.Answer]:
    paste = lookup.read_paste(paste_of(case))
    if case.get("version"):
        paste = replace(paste, version=case["version"])
    return paste, lookup.answer(prepared, paste)


def read_of(paste: lookup.Paste) -> dict:
    return {
        "raised": [{"type": r.type, "message": r.message, "frames": [[f.path, f.line, f.function, f.library] for f in r.frames], "process": r.process, "chained": r.chained, "source": r.source}
                   for r in paste.raised],
        "version": paste.version,
        "asserts": list(paste.asserts),
    }


def match_of(m: lookup.Match) -> dict:
    return {"id": m.id, "score": m.score, "how": m.how, "values": m.values, "confidence": m.confidence}


def finding_of(f: lookup.Finding) -> dict:
    return {"kind": f.kind, "id": f.matches[0].id if f.matches else None, "outside": f.outside.name if f.outside else None}


def expect_of(paste: lookup.Paste, answer: lookup.Answer) -> dict:
    """The answer as the vectors hold it; `at` is which of the paste's exceptions it answers (None for one a wrapper quoted)."""
    found = answer.finding
    at = next((k for k, r in enumerate(paste.raised) if found and r is found.raised), None)
    return {
        "kind": answer.kind,
        "at": at,
        "outside": found.outside.name if found and found.outside else None,
        "assertion": [found.assertion.path, found.assertion.line, found.assertion.function] if found and found.assertion else None,
        "lines": [list(x) for x in found.lines] if found else [],
        "context": [finding_of(f) for f in answer.context],
        "matches": [match_of(m) for m in found.matches] if found else [],
    }


def title_of(error_id: str) -> str:
    return next(e["n"] for e in VECTORS["index"]["errors"] if e["i"] == error_id)


def id_of(title_start: str) -> str:
    (error_id,) = [e["i"] for e in VECTORS["index"]["errors"] if e["n"].startswith(title_start)]
    return error_id


def line(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def dump_vectors(vectors: dict) -> str:
    """The vectors file: one line per error, per read and per expected match, so a diff shows what moved."""
    index = vectors["index"]
    out = ["{", f' "about": {json.dumps(vectors["about"], indent=1, ensure_ascii=False).replace(chr(10), chr(10) + " ")},',
           f' "constants": {line(vectors["constants"])},', f' "rounding": {line(vectors["rounding"])},', ' "index": {']
    out += [f"  {line(k)}: {line(index[k])}," for k in index if k not in ("errors", "o")]
    out += ['  "o": [', ",\n".join(f"   {line(o)}" for o in index["o"]), "  ],"]
    out += ['  "errors": [', ",\n".join(f"   {line(e)}" for e in index["errors"]), "  ]", " },", ' "cases": [']
    cases = []
    for case in vectors["cases"]:
        fields = [f"   {line(k)}: {line(v)}" for k, v in case.items() if k != "expect"]
        expect = case["expect"]
        head = line({k: v for k, v in expect.items() if k != "matches"})[:-1]
        matches = expect["matches"]
        fields.append(f'   "expect": {head}, "matches": [' + ("\n" + ",\n".join(f"    {line(m)}" for m in matches) + "\n   ]}" if matches else "]}"))
        cases.append("  {\n" + ",\n".join(fields) + "\n  }")
    out += [",\n".join(cases), " ]", "}"]
    return "\n".join(out) + "\n"


def regenerated(vectors: dict) -> dict:
    """The vectors with the word weights, the constants, and each case's read and expect from Python."""
    index = dict(vectors["index"])
    index["v"] = lookup.weights([lookup.error_words(e) for e in index["errors"]])
    prepared = lookup.prepare(index)
    cases = []
    for case in vectors["cases"]:
        paste, answer = answer_of(prepared, case)
        fresh = {k: v for k, v in case.items() if k not in ("read", "expect")}
        cases.append({**fresh, "read": read_of(lookup.read_paste(paste_of(case))), "expect": expect_of(paste, answer)})
    constants = {name: getattr(lookup, name) for name in CONSTANTS}
    rounding = [[x, round(x, 4)] for x, _ in vectors["rounding"]]
    return {"about": vectors["about"], "constants": constants, "rounding": rounding, "index": index, "cases": cases}


def test_vectors_file_is_current():
    text = dump_vectors(regenerated(VECTORS))
    if UPDATE:
        VECTORS_FILE.write_text(text, encoding="utf-8")
    assert VECTORS_FILE.read_text(encoding="utf-8") == text, "stale vectors: review the change, then regenerate with UPDATE_VECTORS=1"


def test_vectors_cover_every_shape():
    index, cases = VECTORS["index"], VECTORS["cases"]
    assert index["format"] == lookup.INDEX_FORMAT and len(index["releases"]) >= 2
    assert 15 <= len(index["errors"]) <= 40 and len(cases) >= 60
    assert any(e.get("w") for e in index["errors"]) and 2 <= len(index["o"]) <= 4
    assert len({c["name"] for c in cases}) == len(cases)
    pastes = "\n".join(paste_of(c) for c in cases)
    for shape in ["ERROR 05-06 01:55:26 [core.py:383] ", "ERROR 08-27 05:12:18 worker_base.py:382] ", "(EngineCore_DP0 pid=37512) ",
                  "(APIServer pid=8052) ", "[rank0]: ", "vllm-1  | ", "2025-05-06 01:55:26,123 ", "May 06 01:55:26 gpu-node vllm[4242]: ",
                  "\x1b[31m", "`ValueError`: ", "vllm ValueError: ", "validation error for", "Value error, ", "Assertion error, ",
                  " (parameter=temperature, value=-1)", "Traceback (most recent call last):",
                  "During handling of the above exception, another exception occurred:",
                  "The above exception was the direct cause of the following exception:", "torch.OutOfMemoryError: ",
                  "ray.exceptions.RayTaskError: ", "\r\n", "\u2028", "\ufeff", "🙂", "é"]:
        assert shape in pastes, shape
    expects = [c["expect"] for c in cases]
    assert {m["how"] for e in expects for m in e["matches"]} == {"exact", "truncated", "extended", "similar", "frame"}
    assert {e["kind"] for e in expects} == {"vllm", "wrapper", "outside", "assert", "none"}
    assert {m["confidence"] for e in expects for m in e["matches"]} == {"high", "medium", "low"}
    assert any(e["kind"] == "none" and e["matches"] for e in expects) and any(e["kind"] == "none" and not e["matches"] for e in expects)
    assert any(e["at"] is None and e["kind"] != "none" for e in expects)  # an error a wrapper quoted
    assert {f["kind"] for e in expects for f in e["context"]} >= {"vllm", "wrapper"}
    assert any(len(r["raised"]) > 1 for r in (c["read"] for c in cases)) and any(c["read"]["version"] for c in cases)
    assert {e["outside"] for e in expects} >= {o["name"] for o in index["o"]} | {"module"}
    assert all(c.get("reason") for c in cases if c.get("known_wrong"))
    assert any(e.get("a") for e in index["errors"])  # an error with other messages its code builds


@pytest.mark.parametrize("case", VECTORS["cases"], ids=[c["name"] for c in VECTORS["cases"]])
def test_vectors_python(case):
    paste, answer = answer_of(PREPARED, case)
    assert read_of(lookup.read_paste(paste_of(case))) == case["read"]
    assert expect_of(paste, answer) == case["expect"]


def _wanted():
    for case in VECTORS["cases"]:
        if "want" in case:
            marks = [pytest.mark.xfail(strict=True, reason=case["reason"])] if case.get("known_wrong") else []
            yield pytest.param(case, marks=marks, id=case["name"])


@pytest.mark.parametrize("case", list(_wanted()))
def test_vectors_answer_what_a_user_wants(case):
    """The vectors record what the code does; `want` is what a user should get: the two must agree."""
    want, expect = case["want"], case["expect"]
    assert expect["kind"] == want["kind"]
    if want["kind"] == "outside":
        assert expect["outside"] == want["id"]
    elif want["id"] is not None:
        assert expect["matches"][0]["id"] == want["id"]


def run_javascript(*args: str) -> str:
    """run_vectors.mjs's summary line, after it passed."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH: site/assets/lookup.js is not checked against the vectors")
    done = subprocess.run([node, str(VECTORS_FILE.parent / "run_vectors.mjs"), *args], capture_output=True, text=True, errors="replace", timeout=600)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert summary.endswith(" passed, 0 failed")
    return summary


def test_vectors_javascript():
    summary = run_javascript()
    assert int(summary.split()[0]) >= len(VECTORS["cases"]) + len(VECTORS["rounding"]) + len(VECTORS["constants"])


REAL_INDEX = os.environ.get("VLLM_ERRORS_LOOKUP_INDEX")  # a built site's api/lookup.json


@pytest.mark.skipif(not REAL_INDEX, reason="set VLLM_ERRORS_LOOKUP_INDEX to a built site's api/lookup.json")
def test_javascript_answers_the_real_pastes_as_python_does_on_a_real_index(tmp_path):
    """The vectors' index is smaller than SHORTLIST: on a real one, the candidates' cut matters too."""
    index = json.loads(Path(REAL_INDEX).read_text(encoding="utf-8"))
    if index.get("format") != lookup.INDEX_FORMAT:
        pytest.skip(f"{REAL_INDEX} is of index format {index.get('format')}: build the site again")
    javascript_agrees_on(Path(REAL_INDEX), index, tmp_path)


def javascript_agrees_on(index_file: Path, index: dict, tmp_path: Path) -> None:
    """lookup.js answers every real paste (tests/lookup/pastes/) with `index_file` exactly as lookup.py does."""
    prepared = lookup.prepare(index)
    here = VECTORS_FILE.parent
    items = [item for path in sorted((here / "pastes").glob("*.json")) for item in json.loads(path.read_text(encoding="utf-8"))]
    cases = []
    for n, item in enumerate(items):
        case = {"name": f"{n} {item['source']}", "paste": item["paste"], "version": item.get("version")}
        paste, answer = answer_of(prepared, case)
        cases.append({**case, "read": read_of(lookup.read_paste(case["paste"])), "expect": expect_of(paste, answer)})
    real = tmp_path / "real.json"
    real.write_text(json.dumps({"index": str(index_file.resolve()), "cases": cases}, ensure_ascii=False), encoding="utf-8")
    assert int(run_javascript(str(real)).split()[0]) >= len(cases)


# --- reading each shape of paste --------------------------------------------------------------------

LINE = "ValueError: Unsupported block size: 12. Choose one of [8, 16, 32]."
MESSAGE = "Unsupported block size: 12. Choose one of [8, 16, 32]."

READ = [
    ("bare", LINE, [("ValueError", MESSAGE)]),
    ("message only", MESSAGE, [("", MESSAGE)]),
    ("error log prefix", "ERROR 05-06 01:55:26 [core.py:383] " + LINE, [("ValueError", MESSAGE)]),
    ("old error log prefix", "ERROR 08-27 05:12:18 worker_base.py:382] " + LINE, [("ValueError", MESSAGE)]),
    ("engine core prefix", "(EngineCore_DP0 pid=37512) " + LINE, [("ValueError", MESSAGE)]),
    ("api server prefix", "(APIServer pid=8052) " + LINE, [("ValueError", MESSAGE)]),
    ("rank prefix", "[rank0]: " + LINE, [("ValueError", MESSAGE)]),
    ("docker compose prefix", "vllm-1  | " + LINE, [("ValueError", MESSAGE)]),
    ("stacked prefixes", "vllm-1  | (EngineCore_DP0 pid=37512) ERROR 05-06 01:55:26 [core.py:383] " + LINE, [("ValueError", MESSAGE)]),
    ("timestamp", "2025-05-06 01:55:26,123 " + LINE, [("ValueError", MESSAGE)]),
    ("kubernetes", "2025-05-06T01:55:26.123456789Z stderr F " + LINE, [("ValueError", MESSAGE)]),
    ("journald", "May 06 01:55:26 gpu-node vllm[4242]: " + LINE, [("ValueError", MESSAGE)]),
    ("ansi colours", "\x1b[1;31mERROR\x1b[0m 05-06 01:55:26 [core.py:383] \x1b[31m" + LINE + "\x1b[0m", [("ValueError", MESSAGE)]),
    ("backticks", "`ValueError`: " + MESSAGE, [("ValueError", MESSAGE)]),
    ("in prose", "I start the server and get ValueError: " + MESSAGE, [("ValueError", MESSAGE)]),
    ("pydantic", "pydantic_core._pydantic_core.ValidationError: 1 validation error for CacheConfig\n"
                 f"  Value error, {MESSAGE} [type=value_error, input_value=ArgsKwargs((), {{}}), input_type=ArgsKwargs]\n"
                 "    For further information visit https://errors.pydantic.dev/2.11/v/value_error",
     [("pydantic_core._pydantic_core.ValidationError", MESSAGE)]),
    ("validation suffix", "vllm.exceptions.VLLMValidationError: temperature must be non-negative, got -1. (parameter=temperature, value=-1)",
     [("vllm.exceptions.VLLMValidationError", "temperature must be non-negative, got -1.")]),
    ("several lines", "ValueError: No attention backend supports this configuration:\n  FLASH_ATTN: head size 72\nSet it.",
     [("ValueError", "No attention backend supports this configuration: FLASH_ATTN: head size 72 Set it.")]),
    ("white space folded", "ValueError:   two\tspaces  \n", [("ValueError", "two spaces")]),
    ("windows line endings", "ValueError: one\r\n  two\r\n", [("ValueError", "one two")]),
    ("no message", "NotImplementedError", [("NotImplementedError", "")]),
    ("two exceptions", "KeyError: 'x'\n\nValueError: y", [("KeyError", "'x'"), ("ValueError", "y")]),
    ("empty", "", [("", "")]),
]


@pytest.mark.parametrize(("paste", "raised"), [r[1:] for r in READ], ids=[r[0] for r in READ])
def test_read_paste(paste, raised):
    assert [(r.type, r.message) for r in lookup.read_paste(paste).raised] == raised


def test_a_traceback_gives_the_frames_inside_vllm():
    paste = lookup.read_paste(
        'Traceback (most recent call last):\n'
        '  File "/usr/bin/vllm", line 8, in <module>\n'
        '  File "/usr/lib/python3.12/site-packages/vllm/config/cache.py", line 141, in _verify_block_size\n'
        '    raise ValueError(\n' + LINE
    )
    (raised,) = paste.raised
    assert raised.frames == (lookup.Frame("", 8, "<module>"), lookup.Frame("vllm/config/cache.py", 141, "_verify_block_size"))
    assert raised.message == MESSAGE


def test_interleaved_processes_are_read_apart():
    paste = lookup.read_paste(
        "(EngineCore_DP0 pid=1) Traceback (most recent call last):\n"
        '(APIServer pid=2) File "/x/vllm/entrypoints/api_server.py", line 10, in serve\n'
        '(EngineCore_DP0 pid=1)   File "/x/vllm/config/cache.py", line 141, in _verify_block_size\n'
        "(APIServer pid=2) RuntimeError: Engine core initialization failed. See root cause above.\n"
        "(EngineCore_DP0 pid=1) " + LINE + "\n"
    )
    wrapper, cause = paste.raised  # in the order the lines appear
    assert (wrapper.process, wrapper.type, [f.path for f in wrapper.frames]) == ("APIServer", "RuntimeError", ["vllm/entrypoints/api_server.py"])
    assert (cause.process, cause.message, [f.path for f in cause.frames]) == ("EngineCore_DP0", MESSAGE, ["vllm/config/cache.py"])


def test_the_version_a_paste_names():
    for text, version in [("INFO 05-06 01:55:20 [api_server.py:1043] vLLM API server version 0.8.5", "0.8.5"),
                          ("vllm==0.10.1.post1", "0.10.1.post1"), ("Using vLLM v0.9.0", "0.9.0"), ("VLLM_VERSION=0.9.2", "0.9.2"), ("nothing", None)]:
        assert lookup.read_paste(text).version == version, text
    assert lookup.release_at(["v0.1.0", "v0.2.0", "v0.3.0"], "0.2.0.post1") == 1
    assert lookup.release_at(["v0.1.0", "v0.2.0", "v0.3.0"], "0.0.9") is None


CHAINED = CASES["chained, during handling"]


@pytest.mark.parametrize("marker", ["During handling of the above exception, another exception occurred:",
                                    "The above exception was the direct cause of the following exception:"])
def test_a_chained_paste_answers_the_last_vllm_error_and_reads_its_cause(marker):
    paste = lookup.read_paste(paste_of(CHAINED).replace("During handling of the above exception, another exception occurred:", marker))
    cause, last = paste.raised
    assert (cause.type, cause.message) == ("KeyError", "'qwen3_next'")
    assert last.type == "ValueError" and last.message.startswith("Could not load the configuration of Qwen/Qwen3-Next.")
    found = lookup.answer(PREPARED, paste)
    assert found.kind == "vllm" and found.finding.raised is last and found.context == ()  # a KeyError that is no vLLM error is no context
    best = found.finding.matches[0]
    assert title_of(best.id).startswith("ValueError: Could not load the configuration of {model}")
    assert best.values == {"model": "Qwen/Qwen3-Next"} and best.confidence == "high"


# --- the answer -------------------------------------------------------------------------------------


def test_a_full_match_names_the_error_and_its_values():
    best = lookup.rank(PREPARED, lookup.read_paste(LINE))[0]
    assert title_of(best.id) == "ValueError: Unsupported block size: {block_size}. Choose one of {choices}."
    assert (best.how, best.values, best.confidence, best.type_agrees) == ("exact", {"block_size": "12", "choices": "[8, 16, 32]"}, "high", True)


def test_the_root_cause_is_answered_and_the_wrappers_after_it_are_context():
    found = lookup.answer(PREPARED, lookup.read_paste(paste_of(CASES["wrapper after the root cause"])))
    assert found.kind == "vllm" and found.finding.matches[0].id == id_of("ValueError: Unsupported block size")
    (wrapper,) = found.context  # the same wrapper twice is named once
    assert wrapper.kind == "wrapper" and wrapper.matches[0].id == id_of("RuntimeError: Engine core initialization failed")


def test_a_wrapper_alone_is_answered_as_one():
    found = lookup.answer(PREPARED, lookup.read_paste(paste_of(CASES["wrapper alone"])))
    assert found.kind == "wrapper" and found.finding.matches[0].wrapper and found.context == ()


def test_a_wrapper_quoting_the_error_answers_the_quoted_error():
    paste = lookup.read_paste(paste_of(CASES["wrapper quoting the error"]))
    found = lookup.answer(PREPARED, paste)
    assert found.kind == "vllm" and found.finding.raised not in paste.raised and found.finding.raised.message == MESSAGE
    assert found.finding.matches[0].id == id_of("ValueError: Unsupported block size")
    assert [f.kind for f in found.context] == ["wrapper"]


def test_a_vllm_error_raised_while_handling_another_is_context_of_its_cause():
    found = lookup.answer(PREPARED, lookup.read_paste(paste_of(CASES["chained, a vllm cause"])))
    assert found.finding.matches[0].id == id_of("ValueError: Unsupported block size")
    assert [(f.kind, f.matches[0].id) for f in found.context] == [("vllm", id_of("RuntimeError: Tensor parallel size"))]


def test_an_error_from_outside_vllm_is_named_with_the_pages_on_its_usual_cause():
    found = lookup.answer(PREPARED, lookup.read_paste(paste_of(CASES["outside: torch out of memory"])))
    (oom,) = [o for o in VECTORS["index"]["o"] if o["name"] == "torch-cuda-oom"]
    assert found.kind == "outside" and found.finding.outside == lookup.Outside(oom["name"], oom["says"], tuple(oom["see"]))
    assert lookup.rank(PREPARED, lookup.read_paste(paste_of(CASES["outside: torch out of memory"]))) == []
    foreign = lookup.answer(PREPARED, lookup.read_paste(paste_of(CASES["outside: foreign module"]))).finding.outside
    assert foreign == lookup.Outside("module", "This is an error of ray, raised outside vLLM.")


def test_vllms_own_words_beat_an_outside_pattern():
    found = lookup.answer(PREPARED, lookup.read_paste(paste_of(CASES["port in use, in vllm's own words"])))
    assert found.kind == "vllm" and found.finding.matches[0].how == "exact"
    assert lookup.answer(PREPARED, lookup.read_paste("OSError: [Errno 98] Address already in use")).kind == "outside"


def test_the_release_a_paste_names_breaks_a_tie_between_wordings():
    older, newer = id_of("ValueError: Cannot use FlashAttention-2"), id_of("ValueError: Cannot use FlashAttention backend")
    text = "ValueError: Cannot use the FlashAttention backend for head size 72."
    assert lookup.rank(PREPARED, lookup.read_paste(text))[0].id == newer
    assert lookup.rank(PREPARED, lookup.read_paste("vllm 0.1.0\n" + text))[0].id == older
    assert lookup.rank(PREPARED, lookup.Paste(lookup.read_paste(text).raised, "0.1.9"))[0].id == older


def test_no_match_gives_the_closest_candidates():
    found = lookup.answer(PREPARED, lookup.read_paste("ValueError: block size of the scheduler output is not supported"))
    assert found.kind == "none" and found.finding.matches and all(m.confidence == "low" and m.how != "frame" for m in found.finding.matches)
    assert found.finding.matches[0].id == id_of("ValueError: Unsupported block size")
    assert lookup.rank(PREPARED, lookup.read_paste("ValueError: block size of the scheduler output is not supported")) == []


@pytest.mark.parametrize("paste", ["", "   \n\t", "ok", "ZeroDivisionError: division by zero"])
def test_nothing_to_go_on_gives_nothing(paste):
    found = lookup.answer(PREPARED, lookup.read_paste(paste))
    assert found.kind == "none" and lookup.rank(PREPARED, lookup.read_paste(paste)) == []
    # A word shared by chance ("by") may still bring a candidate, never a likely one.
    assert all(m.confidence == "low" for m in found.finding.matches)
    if not lookup.words(paste):
        assert found.finding.matches == ()


def test_the_cli_index_and_a_prepared_one_agree():
    errors = VECTORS["index"]["errors"]
    assert isinstance(PREPARED, lookup.Prepared) and len(PREPARED.entries) == len(errors) + sum(len(e.get("a", [])) for e in errors)
    for name in ["bare line", "wrapper after the root cause", "outside: nccl", "closest candidates"]:
        paste = lookup.read_paste(paste_of(CASES[name]))
        assert lookup.answer(VECTORS["index"], paste) == lookup.answer(PREPARED, paste), name


# --- junk -------------------------------------------------------------------------------------------

MB = 1_000_000
_rnd = random.Random(0)
JUNK = {
    "random printable": lambda: "".join(_rnd.choice(string.printable) for _ in range(MB)),
    "one long line": lambda: "ValueError: " + "Unsupported block size: " * (MB // 23),
    "exception lines": lambda: "ValueError: Unsupported block size: 1\n" * (MB // 38),
    "exception lines apart": lambda: "ValueError: Unsupported block size: 1\n\n" * (MB // 39),
    "continued lines": lambda: "ValueError: Unsupported block size: 1\n" + "  Choose one of 8\n" * (MB // 18),
    "process tags": lambda: "(EngineCore_DP0 pid=1) ValueError: Unsupported block size: 1\n(APIServer pid=2) x\n" * (MB // 80),
    "frames": lambda: 'File "/x/vllm/config/cache.py", line 141, in f\n' * (MB // 48),
    "dotted names": lambda: "a." * (MB // 2) + "Error: x",
    "words, no spaces": lambda: "`" + "a" * MB + ": x",
    "braces": lambda: "{" * MB,
    "carriage returns": lambda: "\r" * MB + "x",
    "unicode": lambda: "\u2028\x85é\U0001d7d8\ufeff" * (MB // 5),
    "white space": lambda: " " * MB,
    "pydantic wrapper": lambda: "1 validation error for X\n  Value error, " + "a" * MB,
    # VALIDATION_SUFFIX backtracks over the rest of the message from each ' (parameter=': lookup.py and lookup.js
    # first check that the message ends with ')', as the suffix does.
    "parameter suffixes": lambda: "ValueError: x" + " (parameter=x, value=y" * (MB // 22),
    "many rare words": lambda: "ValueError: " + "unsupported block size choose configuration tensor parallel heads " * (MB // 66),
}


@pytest.mark.parametrize("make", JUNK.values(), ids=JUNK.keys())
def test_a_megabyte_of_junk_is_answered_within_a_second(make):
    text = make()
    start = time.perf_counter()
    lookup.answer(PREPARED, lookup.read_paste(text))
    assert time.perf_counter() - start < 1.0


def test_a_frame_with_an_absurd_line_number_does_not_crash():
    (raised,) = lookup.read_paste('File "/x/vllm/a.py", line ' + "9" * 5000 + ", in f\nValueError: x").raised
    assert raised.frames == (lookup.Frame("vllm/a.py", 0, "f"),)


# --- vllm-errors explain on a built site ------------------------------------------------------------

RELEASE = {
    "vllm/__init__.py": "",
    "vllm/config/cache.py": (
        "class CacheConfig:\n"
        "    def verify(self, block_size, choices):\n"
        "        if block_size not in choices:\n"
        "            raise ValueError(f'Unsupported block size: {block_size}. Choose one of {choices}.')\n"
    ),
    "vllm/engine/core.py": "def step(x):\n    assert x is not None, 'step needs its scheduler output'\n",
    "vllm/worker/runner.py": "class Runner:\n    def execute(self, batch):\n        assert (batch.num_tokens ==\n                len(batch.slots))\n",
}
EXPLAIN = "ValueError: Unsupported block size: 12. Choose one of [8, 16, 32]."
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("explain")
    repo = make_repo(tmp, {"v1": RELEASE})
    site_dir = tmp / "site"
    argv = ["build", "--repo", str(repo), "--ref", "v1", "--site-dir", str(site_dir), "--docs-dir", str(tmp / "docs"),
            "--cache-dir", str(tmp / "cache"), "--no-progress"]
    assert main(argv) == 0
    return site_dir


@pytest.fixture(scope="module")
def block_size_id(site) -> str:
    (error,) = [e for e in json.loads((site / "api" / "errors.json").read_text())["errors"] if e["template"].startswith("Unsupported block size")]
    return error["id"]


def test_explain_finds_an_assert_without_a_message_by_its_expression(site, capsys):
    """No traceback, only the check quoted in a report's title: the release's facts know where it is."""
    capsys.readouterr()
    assert main(["explain", "worker crash: assert batch.num_tokens == len(batch.slots)", "--site", str(site)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("An internal check of vLLM failed: assert batch.num_tokens == len(batch.slots)\n"
                          "  in execute, vllm/worker/runner.py:3 (as in vLLM v1; the same check is in 1 release)\n")
    assert main(["explain", "assert x is None", "--site", str(site)]) == 1  # in no release: no answer


def test_explain_json_gives_the_answer(site, block_size_id, capsys):
    capsys.readouterr()
    assert main(["explain", EXPLAIN, "--site", str(site), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["kind"], data["version"], data["context"]) == ("vllm", None, [])
    found = data["answer"]
    assert found["kind"] == "vllm" and found["exception"] == {"type": "ValueError", "message": EXPLAIN.partition(": ")[2]} and found["outside"] is None
    best = found["matches"][0]
    assert best["id"] == block_size_id and best["score"] > 0 and best["how"] == "exact" and best["confidence"] != "low"
    assert best["url"] == f"errors/{block_size_id}.html" and best["values"] == {"block_size": "12", "choices": "[8, 16, 32]"}


def test_explain_text_gives_meaning_solutions_and_the_page(site, block_size_id, capsys):
    capsys.readouterr()
    assert main(["explain", EXPLAIN, "--site", str(site)]) == 0
    out = capsys.readouterr().out
    record = json.loads((site / "api" / "errors" / f"{block_size_id}.json").read_text())
    first = out.splitlines()[0]
    # Two templates make every word nearly uninformative: the exact match is what carries the answer here.
    assert first.startswith("ValueError: Unsupported block size: {block_size}. Choose one of {choices}.   [") and first.endswith(" confidence, exact match]")
    assert "values: block_size = 12, choices = [8, 16, 32]" in out
    assert "raised at vllm/config/cache.py:4 in CacheConfig.verify" in out
    assert "What it means:" in out and record["annotation"]["meaning"] in out
    # The fixture's guard reads a parameter no flag is known to feed: the page gives no solution, and neither does explain.
    assert ("Solutions:" in out) == bool(record["annotation"]["solutions"]) and all(s in out for s in record["annotation"]["solutions"])
    assert f"More: {site / 'errors' / (block_size_id + '.html')}" in out


def test_explain_shows_control_characters_of_a_paste_never_obeys_them(site, capsys):
    capsys.readouterr()
    main(["explain", "ValueError: Unsupported block size: \x1b]0;owned\x07\u202e12. Choose one of [8, 16, 32].", "--site", str(site)])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\x1b]0;owned\\x07\\u202e12" in out


def test_explain_names_a_bare_assert_of_vllm_by_its_site(site, capsys):
    paste = ('  File "/x/site-packages/vllm/config/model.py", line 1747, in get_max_len\n    assert "factor" in rope_scaling\n'
             "           ^^^^^^^^^^^^^^^^^^^^^^^^\nAssertionError\n")
    capsys.readouterr()
    assert main(["explain", paste, "--site", str(site)]) == 0
    out = capsys.readouterr().out
    assert out.startswith('An internal check of vLLM failed: assert "factor" in rope_scaling\n  in get_max_len, vllm/config/model.py:1747\n')
    assert main(["explain", paste, "--site", str(site), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "assert" and data["answer"]["assertion"] == {
        "path": "vllm/config/model.py", "line": 1747, "function": "get_max_len", "code": 'assert "factor" in rope_scaling', "releases": []}


def test_explain_without_a_match_exits_1_with_the_closest_candidates(site, capsys):
    capsys.readouterr()
    assert main(["explain", "ValueError: block size of the scheduler output is not supported", "--site", str(site)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("No vLLM error matches this paste (vLLM v1).")
    assert "Closest candidates, none of them a match:" in out and "Unsupported block size" in out
    assert main(["explain", "ZeroDivisionError: division by zero", "--site", str(site), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "none" and data["answer"]["matches"] == [] and data["context"] == []


def test_explain_names_an_error_from_outside_vllm(site, capsys):
    capsys.readouterr()
    assert main(["explain", OOM, "--site", str(site)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("This is a PyTorch out-of-memory error, raised outside vLLM") and f"  {OOM}\n" in out
    assert main(["explain", OOM, "--site", str(site), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["kind"] == "outside" and data["answer"]["outside"]["name"] == "torch-cuda-oom"


def test_explain_reads_standard_input_and_takes_a_version(site, block_size_id, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("[rank0]: Traceback (most recent call last):\n[rank0]: " + EXPLAIN + "\n"))
    capsys.readouterr()
    assert main(["explain", "--site", str(site), "--json", "--version", "0.1.0"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["answer"]["matches"][0]["id"] == block_size_id and data["version"] == "0.1.0"


def test_explain_without_a_site_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["explain", EXPLAIN, "--site", str(tmp_path / "nowhere")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and "vllm-errors build" in captured.err


def test_explain_refuses_an_index_of_another_format(tmp_path, capsys):
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "lookup.json").write_text(json.dumps({"format": 1, "release": "0.1.0", "errors": []}))
    assert main(["explain", EXPLAIN, "--site", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "build the site again" in captured.err


def test_an_unknown_error_a_wrapper_points_at_is_shown_as_the_cause(tmp_path):
    from vllm_errors.bundle import Site
    from vllm_errors.cli import UNKNOWN_CAUSE, answer_lines

    paste, answer = answer_of(PREPARED, CASES["an unknown error before a wrapper is the cause"])
    lines = answer_lines(answer, Site("vectors", VECTORS["index"], lambda error_id: {}, lambda rel: str(tmp_path / rel)))
    assert lines[0].startswith("No vLLM error matches this paste") and lines[1] == UNKNOWN_CAUSE
    assert lines[2].strip().startswith("AssertionError: The env var SETUP_HOOK is reserved")
    assert lines[3].startswith("Then reported as: RuntimeError: Engine core initialization failed")


def test_the_box_says_what_the_cli_says():
    """The sentences the CLI and the site's box both print are the same text."""
    from vllm_errors import cli

    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH")
    script = ('import("./site/assets/lookup.js").then((m) => console.log(JSON.stringify('
              '{ASSERT_ADVICE: m.ASSERT_ADVICE, UNKNOWN_CAUSE: m.UNKNOWN_CAUSE})))')
    done = subprocess.run([node, "-e", script], capture_output=True, text=True, cwd=VECTORS_FILE.parent.parent.parent, timeout=60)
    assert json.loads(done.stdout) == {"ASSERT_ADVICE": cli.ASSERT_ADVICE, "UNKNOWN_CAUSE": cli.UNKNOWN_CAUSE}
