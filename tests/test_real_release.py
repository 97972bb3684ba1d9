"""The reference error on a real vLLM release (CI builds the mirror; set VLLM_ERRORS_MIRROR to run locally)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from extractor.cli import main

pytestmark = pytest.mark.real

MIRROR = os.environ.get("VLLM_ERRORS_MIRROR")
REFERENCE = "MLA only works with naive serde mode.."
ADAPTER = "vllm/distributed/kv_transfer/kv_connector/v1/lmcache_integration/vllm_v1_adapter.py"


@pytest.fixture(scope="module")
def catalog(tmp_path_factory):
    if not MIRROR:
        pytest.skip("VLLM_ERRORS_MIRROR names no release mirror")
    out = tmp_path_factory.mktemp("real") / "catalog.json"
    cache = Path(os.environ.get("VLLM_ERRORS_CACHE", tmp_path_factory.mktemp("cache")))
    assert main(["scan", "--repo", MIRROR, "--ref", "v0.28.0", "--output", str(out), "--cache-dir", str(cache), "--no-progress"]) == 0
    return json.loads(out.read_text())


def test_reference_error_is_found_as_described(catalog):
    (error,) = [e for e in catalog["errors"] if e["template"] == REFERENCE]
    assert error["exception"] == "ValueError" and error["kind"] == "raise"
    (site,) = error["sites"]
    assert (site["path"], site["line"], site["function"]) == (ADAPTER, 467, "_init_lmcache_engine")
    (guard,) = site["guard"]
    assert guard["kind"] == "if" and guard["holds"]
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
