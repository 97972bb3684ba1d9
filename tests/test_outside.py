"""Errors from outside vLLM (annotations/outside.yaml): the list as shipped, malformed lists, and its pointers to vLLM errors."""

from __future__ import annotations

import re
import textwrap

import pytest

from vllm_errors.model import ErrorRecord, UserError
from vllm_errors.outside import load_outside, resolve_outside
from vllm_errors.pipeline import ANNOTATIONS_DIR


def test_the_shipped_list_is_well_formed_and_names_common_foreign_errors():
    entries = load_outside(ANNOTATIONS_DIR / "outside.yaml")
    names = {e["name"] for e in entries}
    assert {"torch-cuda-oom", "cuda-runtime", "nccl", "vllm-extension", "huggingface-hub", "transformers", "python"} <= names
    oom = next(e for e in entries if e["name"] == "torch-cuda-oom")
    assert re.search(oom["message"], "cuda out of memory. tried to allocate 2.00 gib")
    # JavaScript reads the same patterns: none may use what its regular expressions lack or read otherwise.
    for entry in entries:
        for key in ("type", "message"):
            assert not re.search(r"\(\?[iLmsux]|\(\?P|\\[AZz]|\(\?<[^=!]", entry.get(key) or ""), (entry["name"], key)


@pytest.mark.parametrize(
    "text, fault",
    [
        ("- name: x\n  message: '('\n  says: s\n", "outside.yaml:1 (x): message is not a regular expression"),
        ("- name: x\n  message: a\n", "outside.yaml:1: an entry needs name and says"),
        ("- name: x\n  says: s\n", "outside.yaml:1 (x): give a type or a message pattern"),
        ("- name: y\n  message: a\n  says: s\n- name: x\n  message: a\n  says: s\n  colour: red\n", "outside.yaml:4: an entry needs name and says, and may have"),
        ("- name: x\n  message: a\n  says: s\n  see: nope\n", "outside.yaml:1 (x): see must be a list"),
        ("name: x\n", "outside.yaml:1: expected a list of entries"),
        ("- [unclosed\n", "outside.yaml:2: invalid YAML"),
        ("- name: x\n  message: a\n  says: s\n  says: t\n", "outside.yaml:4: duplicate key 'says': give each key once"),
        ("- name: x\n  message: a\n  says: caf\xe9\n", "outside.yaml:3: byte 0xe9 is not UTF-8"),
    ],
)
def test_a_malformed_list_is_one_line_naming_the_entry(tmp_path, text, fault):
    path = tmp_path / "outside.yaml"
    path.write_bytes(textwrap.dedent(text).encode("latin-1"))  # ASCII but for the byte that is not UTF-8
    with pytest.raises(UserError) as e:
        load_outside(path)
    assert fault in str(e.value) and "\n" not in str(e.value)


def test_a_directory_for_the_list_is_one_line(tmp_path):
    (tmp_path / "outside.yaml").mkdir()
    with pytest.raises(UserError, match="outside.yaml: is a directory"):
        load_outside(tmp_path / "outside.yaml")


def _record(id: str, template: str) -> ErrorRecord:
    from test_render import record, site  # noqa: PLC0415 - the render tests' builders

    return record(id, "ValueError", template, (site("vllm/config/cache.py", 1, "f", template),))


def test_see_names_the_errors_whose_message_starts_so():
    records = (_record("a" * 16, "No available memory for the cache blocks. Try {x}."), _record("b" * 16, "Something else"))
    (entry,) = resolve_outside(({"name": "oom", "message": "out of memory", "says": "It  is\n torch's.", "see": ["No available memory", "Missing"]},), records)
    assert entry.see == ("a" * 16,) and entry.says == "It is torch's." and entry.type == ""
