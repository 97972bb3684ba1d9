"""What the issues ask of real vLLM releases. CI builds the mirror; set VLLM_ERRORS_MIRROR to a mirror
with tags v0.28.0, v0.33.0 and v0.34.0 (`vllm-errors mirror DEST 0.28.0 0.32.0 0.33.0 0.34.0`) to run them locally."""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from vllm_errors import pipeline
from vllm_errors.cli import main

pytestmark = pytest.mark.real

MIRROR = os.environ.get("VLLM_ERRORS_MIRROR")
REFERENCE = "MLA only works with naive serde mode.."
ADAPTER = "vllm/distributed/kv_transfer/kv_connector/v1/lmcache_integration/vllm_v1_adapter.py"


def cache_dir(factory) -> Path:
    return Path(os.environ.get("VLLM_ERRORS_CACHE") or factory.getbasetemp() / "cache")


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    if not MIRROR:
        pytest.skip("VLLM_ERRORS_MIRROR names no release mirror")
    out = tmp_path_factory.mktemp("real") / "catalog.json"
    args = ["scan", "--repo", MIRROR, "--ref", "v0.28.0", "--output", str(out), "--cache-dir", str(cache_dir(tmp_path_factory)), "--no-progress"]
    assert main(args) == 0
    return json.loads(out.read_text())


def test_reference_error_is_found_as_described(catalog):
    (error,) = [e for e in catalog["errors"] if e["template"] == REFERENCE]
    assert error["exception"] == "ValueError" and error["kind"] == "raise"
    (site,) = error["sites"]
    assert (site["path"], site["line"], site["function"]) == (ADAPTER, 467, "_init_lmcache_engine")
    (guard,) = [g for g in site["guard"] if g["kind"] == "if"]
    assert guard["holds"]
    assert " ".join(guard["code"].split()) == (
        'use_mla and ( lmcache_config.remote_serde != "naive" and lmcache_config.remote_serde is not None )'
    )
    assert [(a["name"], a["code"]) for a in site["assignments"]] == [
        ("model_config", "model_config = vllm_config.model_config"),
        ("use_mla", "use_mla = mla_enabled(model_config)"),
    ]
    code = site["code"]["text"].split("\n")
    raise_at = site["line"] - site["code"]["first_line"]
    assert code[raise_at].strip() == f'raise ValueError("{REFERENCE}")'
    assert any("use_mla = mla_enabled(model_config)" in line for line in code[:raise_at])
    assert catalog["snapshot"]["upstream_commit"].startswith("2cf0a6915")


def test_release_is_scanned_whole(catalog):
    sites = sum(len(e["sites"]) for e in catalog["errors"])
    assert sites > 6000 and len(catalog["errors"]) > 5000  # 0.28.0: 6,478 sites
    assert not catalog["problems"]
    names = {c["qualname"] for c in catalog["exception_classes"]}
    assert {"vllm.exceptions.VLLMError", "vllm.exceptions.VLLMValidationError"} <= names


# --- the site of 0.28.0 (issue 3) and the reference error's annotation (issue 4) -----------------


@pytest.fixture(scope="module")
def site(tmp_path_factory, catalog):
    root = tmp_path_factory.mktemp("site")
    args = ["build", "--repo", MIRROR, "--ref", "v0.28.0", "--site-dir", str(root / "site"), "--docs-dir", str(root / "docs"),
            "--cache-dir", str(cache_dir(tmp_path_factory)), "--no-progress"]
    assert main(args) == 0
    return root / "site"


def reference_record(site):
    index = json.loads((site / "api" / "errors.json").read_text())
    (entry,) = [e for e in index["errors"] if e["template"] == REFERENCE]
    return json.loads((site / "api" / "errors" / f"{entry['id']}.json").read_text())


def test_reference_page_has_every_section_and_the_raise_highlighted(site):
    record = reference_record(site)
    html = (site / record["url"]).read_text()
    for heading in ("Error message", "What it means", "When it happens", "Solutions", "Example fix", "Where it is raised", "Related errors"):
        assert f">{heading}<" in html, heading
    highlighted = re.search(r'<span id="__span-\d+-467">.*?</span>\n', html, re.S).group(0)
    assert 'class="hll"' in highlighted and "MLA only works with naive serde mode" in highlighted
    assert f"https://github.com/vllm-project/vllm/blob/2cf0a6915/{ADAPTER}#L467-L467" in html
    assert f"../api/errors/{record['id']}.json" in html


def test_reference_json_validates_against_the_schema(site):
    schema = json.loads((site / "api" / "schema.json").read_text())
    record = reference_record(site)
    Draft202012Validator(schema).validate(record)
    assert (site / "api" / "errors" / record["id"]).read_bytes() == (site / "api" / "errors" / f"{record['id']}.json").read_bytes()


def test_reference_annotation(site):
    record = reference_record(site)
    annotation = record["annotation"]
    trigger = " ".join(annotation["triggers"])
    assert "MLA" in trigger and "`remote_serde`" in trigger and "LMCacheConnectorV1" in trigger  # the curated note's, in the user's terms
    solutions = " ".join(annotation["solutions"])
    # The lever is LMCache's configuration, which vLLM's code does not declare: a curated note names it.
    assert "`remote_serde` to `naive`" in solutions and "LMCACHE_REMOTE_SERDE=naive" in solutions
    assert annotation["sources"]["solutions"] == "curated"
    index = {e["id"]: e["title"] for e in json.loads((site / "api" / "errors.json").read_text())["errors"]}
    assert "ValueError: layerwise MLA connector is not supported yet" in [index[i] for i in record["related"]]


# --- annotations across the newest release, which the curated notes are written against (issue 4) ------------

NEWEST = "v0.34.0"


@pytest.fixture(scope="module")
def kb_newest(tmp_path_factory):
    if not MIRROR:
        pytest.skip("VLLM_ERRORS_MIRROR names no release mirror")
    request = pipeline.ScanRequest(repo=MIRROR, ref=NEWEST, cache_dir=cache_dir(tmp_path_factory), progress=False)
    catalog, _ = pipeline.scan_release(request)
    kb, notes, _ = pipeline.annotate_catalog(catalog)
    return catalog, kb, notes


def test_every_error_says_when_and_derived_solutions_name_a_lever(kb_newest):
    _, kb, _ = kb_newest
    assert sum(1 for r in kb.records if r.annotation.triggers) / len(kb.records) >= 0.99
    # A derived solution names a flag, a VLLM_* variable, a config field (a code span naming it) or a request
    # field, says the error only reports a caught one, or tells a plugin's author which method to provide; never "set
    # `some_local` to ...". Curated ones are people's words.
    lever = re.compile(r"`--[a-z]|`VLLM_[A-Z]|`[A-Z][A-Za-z0-9]*\.[a-z_][a-z0-9_]*`|this error was raised while handling|"  # ..., `CacheConfig.block_size`
                       r"the environment variable `[A-Z_][A-Z0-9_]*`|in the model's `config.json`|"  # read with os.environ; the checkpoint
                       r"the request field `|\(the request's `|"  # a field of a request, or of SamplingParams
                       r"^If the class in use is your own \(a plugin|"  # a stub's
                       r"^Look up the exception this passes on|"  # a re-raise's: the caught exception is the error
                       r"^Check the model's checkpoint|Use a checkpoint whose|in the model's quantization config|"  # the checkpoint
                       r"^Do what the message says: “")  # the message's own advice to its reader
    derived = [(r.id, s) for r in kb.records if r.annotation.sources.get("solutions") == "derived" for s in r.annotation.solutions]
    assert derived and [(i, s) for i, s in derived if not lever.search(s)] == []
    assert sum(1 for r in kb.records if any(re.search(r"`--[a-z]|`VLLM_[A-Z]", s) for s in r.annotation.solutions)) >= 350


def test_flags_named_are_declared_by_vllm(kb_newest):
    catalog, kb, _ = kb_newest
    declared = {flag for f in catalog.flags for flag in f.flags}
    naming = 0
    for record in kb.records:
        a = record.annotation
        # A flag is named as a code span that starts with it (`--max-model-len 8192`), or as a
        # shell fix's token; other code spans quote the code, which may hold any string.
        named = {m for t in a.solutions for m in re.findall(r"`+ ?(--[a-z][a-z0-9-]+)", t)}
        if a.example_fix and a.example_fix.language == "shell":
            named |= {t.split("=")[0] for text in (a.example_fix.before, a.example_fix.after) for t in shlex.split(text) if t.startswith("--")}
        # argparse's BooleanOptionalAction declares --no-X beside every boolean --X
        unknown = {f for f in named if f not in declared and "--" + f.removeprefix("--no-") not in declared}
        assert not unknown, (record.id, unknown)
        naming += bool(named)
    assert naming >= 150


def test_variables_and_json_keys_named_exist_in_the_release(kb_newest):
    catalog, kb, _ = kb_newest
    declared = {v.name for v in catalog.env_vars}
    fields = {f.name for f in catalog.config_fields}
    variables = keys = 0
    for record in kb.records:
        if record.annotation.sources.get("solutions") != "derived":
            continue
        for text in record.annotation.solutions:
            named = set(re.findall(r"`(VLLM_[A-Z0-9_]+)", text))
            assert named <= declared, (record.id, named - declared)
            found = set(re.findall(r"`([a-z_][a-z0-9_]*)` in `--[a-z-]+-config`", text))
            # a key of a free-form dict a flag takes (`--model-loader-extra-config`) is one the raising code reads by name,
            # or the code a way around quotes (`vLLM calls f only where not extra_config.get('enable_multithread_load') holds`)
            read = {k for k in found - fields if any(f'"{k}"' in site.code.text or f"'{k}'" in site.code.text for site in record.sites)
                    or re.search(rf"""(?:\.get\(|\[)['"]{k}['"]""", text)}
            assert found - read <= fields, (record.id, found - read - fields)
            variables += bool(named)
            keys += bool(found)
    assert variables >= 30 and keys >= 10, (variables, keys)


def test_every_example_fix_parses(kb_newest):
    _, kb, _ = kb_newest
    fixes = [r.annotation.example_fix for r in kb.records if r.annotation.example_fix]
    assert len(fixes) > 100
    for fix in fixes:
        for text in (fix.before, fix.after):
            if fix.language == "python":
                ast.parse(text)
            elif fix.language == "json":
                json.loads(text)
            else:
                assert shlex.split(text)


def test_curated_notes_are_current(kb_newest, tmp_path_factory):
    _, kb, notes = kb_newest
    assert notes.stale == ()
    assert notes.unknown_settings == ()  # every flag and VLLM_ variable a note names, the newest release declares
    assert notes.reporting == ()  # "report it" is no solution: an internal error's page has its own section
    # a note whose error the newest release no longer raises is kept for the releases that do (the site's history)
    request = pipeline.ScanRequest(repo=MIRROR, ref="v0.33.0", cache_dir=cache_dir(tmp_path_factory), progress=False)
    before = {e.id for e in pipeline.scan_release(request)[0].errors}
    assert [name for name in notes.orphaned if Path(name).stem not in before] == []
    assert sum(1 for r in kb.records if "curated" in r.annotation.sources.values()) >= 25


# --- lookup on the newest release (issue 5) -------------------------------------------------------------------


def test_round_trip_lookup_finds_the_right_error_first(kb_newest):
    from vllm_errors import lookup

    _, kb, _ = kb_newest
    index = lookup.build_index(kb)
    entries = lookup.prepare(index)
    prefix = "(EngineCore_DP0 pid=37512) ERROR 05-06 01:55:26 [core.py:383] "
    total = right = 0
    for error in index["errors"]:
        if not error["p"] or not error["t"]:
            continue
        line = f"{error['t'][0]}: {lookup.example_message(error['p'])}"
        for paste in (line, "\n".join(prefix + row for row in line.split("\n"))):
            found = lookup.rank(entries, lookup.read_paste(paste))
            total += 1
            right += bool(found) and found[0].id == error["i"]
    assert total > 7000
    assert right / total >= 0.98
