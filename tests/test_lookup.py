"""Looking up a pasted error: the shared vectors (here and through node), each paste shape, junk, and `vllm-errors explain`.

The vectors in tests/lookup/vectors.json hold what extractor/lookup.py reads and ranks for each paste;
site/assets/lookup.js must give the same (tests/lookup/run_vectors.mjs). After a deliberate change:

    UPDATE_VECTORS=1 .venv/bin/pytest tests/test_lookup.py -k vectors
"""

from __future__ import annotations

import builtins
import io
import json
import os
import random
import shutil
import string
import subprocess
import time
from pathlib import Path

import pytest

from extractor import lookup
from extractor.cli import main
from fixture_repo import make_repo

VECTORS_FILE = Path(__file__).parent / "lookup" / "vectors.json"
VECTORS = json.loads(VECTORS_FILE.read_text(encoding="utf-8"))
ENTRIES = lookup.prepare(VECTORS["index"])
UPDATE = bool(os.environ.get("UPDATE_VECTORS"))


def read_of(paste: lookup.Paste) -> dict:
    return {
        "raised": [{"type": r.type, "message": r.message, "frames": [[f.path, f.line, f.function] for f in r.frames]} for r in paste.raised],
        "version": paste.version,
    }


def expect_of(matches: list[lookup.Match]) -> list[dict]:
    return [{"id": m.id, "score": m.score, "how": m.how, "values": m.values, "confidence": m.confidence} for m in matches]


def title_of(error_id: str) -> str:
    return next(e["n"] for e in VECTORS["index"]["errors"] if e["i"] == error_id)


def line(value) -> str:
    return json.dumps(value, ensure_ascii=False)


def dump_vectors(vectors: dict) -> str:
    """The vectors file: one line per error, per read and per expected match, so a diff shows what moved."""
    index = vectors["index"]
    out = ["{", f' "about": {json.dumps(vectors["about"], indent=1, ensure_ascii=False).replace(chr(10), chr(10) + " ")},', ' "index": {']
    out += [f'  {line(k)}: {line(index[k])},' for k in index if k != "errors"]
    out += ['  "errors": [', ",\n".join(f"   {line(e)}" for e in index["errors"]), "  ]", " },", ' "cases": [']
    cases = []
    for case in vectors["cases"]:
        fields = [f'   {line(k)}: {line(v)}' for k, v in case.items() if k != "expect"]
        expect = case["expect"]
        fields.append('   "expect": [' + ("\n" + ",\n".join(f"    {line(m)}" for m in expect) + "\n   ]" if expect else "]"))
        cases.append("  {\n" + ",\n".join(fields) + "\n  }")
    out += [",\n".join(cases), " ]", "}"]
    return "\n".join(out) + "\n"


def regenerated(vectors: dict) -> dict:
    """The vectors with read and expect from Python; a case Python cannot answer keeps its stored expect."""
    cases = []
    for case in vectors["cases"]:
        paste = lookup.read_paste(case["paste"])
        fresh = {**case, "read": read_of(paste)}
        if "python_raises" not in case:
            fresh["expect"] = expect_of(lookup.rank(ENTRIES, paste))
        cases.append(fresh)
    return {**vectors, "cases": cases}


def test_vectors_file_is_current():
    text = dump_vectors(regenerated(VECTORS))
    if UPDATE:
        VECTORS_FILE.write_text(text, encoding="utf-8")
    assert VECTORS_FILE.read_text(encoding="utf-8") == text, "stale vectors: review the change, then regenerate with UPDATE_VECTORS=1"


def test_vectors_cover_every_shape():
    index, cases = VECTORS["index"], VECTORS["cases"]
    assert 15 <= len(index["errors"]) <= 25 and len(cases) >= 40
    assert len({c["name"] for c in cases}) == len(cases)
    pastes = "\n".join(c["paste"] for c in cases)
    for shape in ["ERROR 05-06 01:55:26 [core.py:383] ", "(EngineCore_DP0 pid=37512) ", "(APIServer pid=8052) ", "[rank0]: ", "vllm-1  | ",
                  "validation error for", "Value error, ", " (parameter=temperature, value=-1)", "Traceback (most recent call last):",
                  "During handling of the above exception, another exception occurred:",
                  "The above exception was the direct cause of the following exception:"]:
        assert shape in pastes, shape
    hows = {m["how"] for c in cases for m in c["expect"]}
    assert hows == {"full", "truncated", "frame", "similar"}
    assert any(c["expect"] == [] for c in cases) and all(c.get("reason") for c in cases if c.get("known_wrong"))


def _vector_params():
    for case in VECTORS["cases"]:
        marks = []
        if "python_raises" in case:
            marks.append(pytest.mark.xfail(raises=getattr(builtins, case["python_raises"]), strict=True, reason=case["reason"]))
        yield pytest.param(case, marks=marks, id=case["name"])


@pytest.mark.parametrize("case", list(_vector_params()))
def test_vectors_python(case):
    paste = lookup.read_paste(case["paste"])
    assert read_of(paste) == case["read"]
    assert expect_of(lookup.rank(ENTRIES, paste)) == case["expect"]


def test_vectors_javascript():
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH: site/assets/lookup.js is not checked against the vectors")
    runner = VECTORS_FILE.parent / "run_vectors.mjs"
    done = subprocess.run([node, str(runner)], capture_output=True, text=True, timeout=120)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert summary.endswith(" passed, 0 failed") and int(summary.split()[0]) >= len(VECTORS["cases"])


# --- reading each shape of paste --------------------------------------------------------------------

LINE = "ValueError: Unsupported block size: 12. Choose one of [8, 16, 32]."
MESSAGE = "Unsupported block size: 12. Choose one of [8, 16, 32]."

READ = [
    ("bare", LINE, [("ValueError", MESSAGE)]),
    ("message only", MESSAGE, [("", MESSAGE)]),
    ("error log prefix", "ERROR 05-06 01:55:26 [core.py:383] " + LINE, [("ValueError", MESSAGE)]),
    ("engine core prefix", "(EngineCore_DP0 pid=37512) " + LINE, [("ValueError", MESSAGE)]),
    ("api server prefix", "(APIServer pid=8052) " + LINE, [("ValueError", MESSAGE)]),
    ("rank prefix", "[rank0]: " + LINE, [("ValueError", MESSAGE)]),
    ("docker compose prefix", "vllm-1  | " + LINE, [("ValueError", MESSAGE)]),
    ("stacked prefixes", "vllm-1  | (EngineCore_DP0 pid=37512) ERROR 05-06 01:55:26 [core.py:383] " + LINE, [("ValueError", MESSAGE)]),
    ("timestamp", "2025-05-06 01:55:26,123 " + LINE, [("ValueError", MESSAGE)]),
    ("pydantic", "pydantic_core._pydantic_core.ValidationError: 1 validation error for CacheConfig\n"
                 f"  Value error, {MESSAGE} [type=value_error, input_value=ArgsKwargs((), {{}}), input_type=ArgsKwargs]\n"
                 "    For further information visit https://errors.pydantic.dev/2.11/v/value_error",
     [("pydantic_core._pydantic_core.ValidationError", MESSAGE)]),
    ("validation suffix", "vllm.exceptions.VLLMValidationError: temperature must be non-negative, got -1. (parameter=temperature, value=-1)",
     [("vllm.exceptions.VLLMValidationError", "temperature must be non-negative, got -1.")]),
    ("several lines", "ValueError: No attention backend supports this configuration:\n  FLASH_ATTN: head size 72\nSet it.",
     [("ValueError", "No attention backend supports this configuration: FLASH_ATTN: head size 72 Set it.")]),
    ("white space folded", "ValueError:   two\tspaces  \n", [("ValueError", "two spaces")]),
    ("no message", "NotImplementedError", [("NotImplementedError", "")]),
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


CHAINED = (
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.12/site-packages/transformers/configuration_auto.py", line 966, in __getitem__\n'
    "KeyError: 'qwen3_next'\n\n"
    "During handling of the above exception, another exception occurred:\n\n"
    "Traceback (most recent call last):\n"
    '  File "/usr/lib/python3.12/site-packages/vllm/transformers_utils/config.py", line 612, in get_config\n'
    "ValueError: Could not load the configuration of Qwen/Qwen3-Next. Is it a Hugging Face model id or a local directory with a config.json?\n"
)


@pytest.mark.parametrize("marker", ["During handling of the above exception, another exception occurred:",
                                    "The above exception was the direct cause of the following exception:"])
def test_a_chained_paste_answers_the_last_vllm_error_and_reads_its_cause(marker):
    paste = lookup.read_paste(CHAINED.replace("During handling of the above exception, another exception occurred:", marker))
    cause, last = paste.raised
    assert (cause.type, cause.message) == ("KeyError", "'qwen3_next'")
    assert last.type == "ValueError" and last.message.startswith("Could not load the configuration of Qwen/Qwen3-Next.")
    best = lookup.rank(ENTRIES, paste)[0]
    assert title_of(best.id).startswith("ValueError: Could not load the configuration of {model}")
    assert best.values == {"model": "Qwen/Qwen3-Next"} and best.confidence == "high"


# --- matching -----------------------------------------------------------------------------------------


def test_a_full_match_names_the_error_and_its_values():
    (best,) = lookup.rank(ENTRIES, lookup.read_paste(LINE))
    assert title_of(best.id) == "ValueError: Unsupported block size: {block_size}. Choose one of {choices}."
    assert (best.how, best.values, best.confidence, best.type_agrees) == ("full", {"block_size": "12", "choices": "[8, 16, 32]"}, "high", True)


def test_no_match_gives_the_closest_candidates():
    found = lookup.rank(ENTRIES, lookup.read_paste("ValueError: The tokenizer has no chat template; pass --chat-template to use one"))
    assert found and all(m.how == "similar" and m.confidence == "low" for m in found)
    assert title_of(found[0].id).startswith("ValueError | TypeError: Cannot use the chat template")


@pytest.mark.parametrize("paste", ["", "   \n\t", "ZeroDivisionError: division by zero", "ok"])
def test_nothing_to_go_on_gives_nothing(paste):
    assert lookup.rank(ENTRIES, lookup.read_paste(paste)) == []


def test_the_cli_index_and_a_prepared_one_agree():
    paste = lookup.read_paste(LINE)
    assert lookup.rank(VECTORS["index"], paste) == lookup.rank(ENTRIES, paste)


# --- junk -------------------------------------------------------------------------------------------

MB = 1_000_000
_rnd = random.Random(0)
JUNK = {
    "random printable": lambda: "".join(_rnd.choice(string.printable) for _ in range(MB)),
    "one long line": lambda: "ValueError: " + "Unsupported block size: " * (MB // 23),
    "exception lines": lambda: "ValueError: Unsupported block size: 1\n" * (MB // 38),
    "frames": lambda: 'File "/x/vllm/config/cache.py", line 141, in f\n' * (MB // 48),
    "braces": lambda: "{" * MB,
    "unicode": lambda: "\u2028\x85é\U0001d7d8" * (MB // 4),
    "white space": lambda: " " * MB,
    "pydantic wrapper": lambda: "1 validation error for X\n  Value error, " + "a" * MB,
}


@pytest.mark.parametrize("make", JUNK.values(), ids=JUNK.keys())
def test_a_megabyte_of_junk_is_answered_quickly(make):
    text = make()
    start = time.perf_counter()
    lookup.rank(ENTRIES, lookup.read_paste(text))
    assert time.perf_counter() - start < 0.5


def test_a_megabyte_of_parameter_suffixes_is_answered_within_a_second():
    # VALIDATION_SUFFIX backtracks over the rest of the message from each ' (parameter=': ~0.3 s here.
    # lookup.js first checks that the message ends with ')', as the suffix does.
    text = "ValueError: x" + " (parameter=x, value=y" * (MB // 22)
    start = time.perf_counter()
    lookup.rank(ENTRIES, lookup.read_paste(text))
    assert time.perf_counter() - start < 1.0


def test_many_exception_lines_apart_are_answered_quickly():
    text = "ValueError: Unsupported block size: 1\n\n" * (MB // 39)
    start = time.perf_counter()
    lookup.rank(ENTRIES, lookup.read_paste(text))
    assert time.perf_counter() - start < 0.5


def test_a_frame_with_an_absurd_line_number_does_not_crash():
    lookup.read_paste('File "/x/vllm/a.py", line ' + "9" * 5000 + ", in f\nValueError: x")


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
}
EXPLAIN = "ValueError: Unsupported block size: 12. Choose one of [8, 16, 32]."


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


def test_explain_json_lists_the_matches(site, block_size_id, capsys):
    capsys.readouterr()
    assert main(["explain", EXPLAIN, "--site", str(site), "--json"]) == 0
    matches = json.loads(capsys.readouterr().out)
    assert isinstance(matches, list) and matches[0]["id"] == block_size_id and matches[0]["score"] > 0
    assert matches[0]["url"] == f"errors/{block_size_id}.html" and matches[0]["values"] == {"block_size": "12", "choices": "[8, 16, 32]"}


def test_explain_text_gives_meaning_solutions_and_the_page(site, block_size_id, capsys):
    capsys.readouterr()
    assert main(["explain", EXPLAIN, "--site", str(site)]) == 0
    out = capsys.readouterr().out
    record = json.loads((site / "api" / "errors" / f"{block_size_id}.json").read_text())
    assert out.startswith("ValueError: Unsupported block size: {block_size}. Choose one of {choices}.   [high confidence, full match]")
    assert "values: block_size = 12, choices = [8, 16, 32]" in out
    assert "raised at vllm/config/cache.py:4 in CacheConfig.verify" in out
    assert "What it means:" in out and record["annotation"]["meaning"] in out
    assert "Solutions:" in out and all(s in out for s in record["annotation"]["solutions"])
    assert f"More: {site / 'errors' / (block_size_id + '.html')}" in out


def test_explain_without_a_match_exits_1_with_the_closest_candidates(site, capsys):
    capsys.readouterr()
    assert main(["explain", "ValueError: block size of the scheduler output is not supported", "--site", str(site)]) == 1
    out = capsys.readouterr().out
    assert out.startswith("No error of vLLM") and "Closest candidates:" in out and "Unsupported block size" in out
    assert main(["explain", "ZeroDivisionError: division by zero", "--site", str(site), "--json"]) == 1
    assert json.loads(capsys.readouterr().out) == []


def test_explain_reads_standard_input(site, block_size_id, capsys, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("[rank0]: Traceback (most recent call last):\n[rank0]: " + EXPLAIN + "\n"))
    capsys.readouterr()
    assert main(["explain", "--site", str(site), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["id"] == block_size_id


def test_explain_without_a_site_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["explain", EXPLAIN, "--site", str(tmp_path / "nowhere")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1 and "vllm-errors build" in captured.err
