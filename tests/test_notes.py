"""Curated notes: they win over derived text, go stale when the code changes, and a malformed one fails loudly."""

from __future__ import annotations

import pytest

from extractor.catalog import build_catalog
from extractor.knowledge import build_knowledge_base
from extractor.model import Annotation, Snapshot, UserError
from extractor.notes import check_notes, code_hash, curated_annotator, parse_note
from extractor.scanner import scan_module

SNAP = Snapshot(repository="vllm-project/vllm", ref="v1", commit="c" * 40, date="2025-01-01T00:00:00+00:00", upstream_commit="c" * 40)
CODE = "def f(n, limit):\n    if n > limit:\n        raise ValueError(f'too many: {n}')\n"


def catalog_of(code):
    return build_catalog(SNAP, [scan_module("vllm/m.py", code.encode())], 1)


def note_text(error, **extra):
    lines = ["---", "error: 'ValueError: too many: {n}'", f"code_hash: {code_hash(error)}", "solutions:", "  - Pass fewer items."]
    lines += [f"{k}: {v}" for k, v in extra.items()]
    return "\n".join(lines + ["---", "Curated meaning.", ""])


def test_curated_fields_win_over_derived_ones():
    catalog = catalog_of(CODE)
    (error,) = catalog.errors
    note = parse_note(f"annotations/{error.id}.md", note_text(error))
    derived = lambda e: Annotation(meaning="derived", triggers=("derived trigger",), solutions=("derived",), sources={"meaning": "derived", "triggers": "derived", "solutions": "derived"})
    kb = build_knowledge_base(catalog, (derived, curated_annotator({note.id: note}, {error.id: error})))
    annotation = kb.records[0].annotation
    assert annotation.meaning == "Curated meaning." and annotation.solutions == ("Pass fewer items.",)
    assert annotation.triggers == ("derived trigger",)  # the note left it alone
    assert annotation.sources == {"meaning": "curated", "solutions": "curated", "triggers": "derived"}
    assert not annotation.stale


def test_note_goes_stale_when_its_code_changes_and_orphaned_when_its_error_goes():
    (old,) = catalog_of(CODE).errors
    note = parse_note(f"annotations/{old.id}.md", note_text(old))
    changed = catalog_of(CODE.replace("n > limit", "n >= limit"))
    (new,) = changed.errors
    assert new.id == old.id and code_hash(new) != code_hash(old)
    assert curated_annotator({note.id: note}, {new.id: new})(new).stale
    assert check_notes({note.id: note}, {new.id: new}).stale == (f"annotations/{old.id}.md",)
    moved = catalog_of("import os\n\n\n" + CODE)  # lines moved: not stale
    assert check_notes({note.id: note}, {e.id: e for e in moved.errors}).stale == ()
    gone = catalog_of(CODE.replace("too many", "too much"))
    assert check_notes({note.id: note}, {e.id: e for e in gone.errors}).orphaned == (f"annotations/{old.id}.md",)


MALFORMED = [
    ("---\nerror: x\ncode_hash: abc\nsolutions: [unclosed\n---\nbody\n", ":5: invalid YAML"),
    ("---\nerror: x\ncode_hash: abc\nsolution: typo\n---\n", ":4: solution: Extra inputs are not permitted"),
    ("---\nerror: x\ncode_hash: abc\nkind: fatal\n---\n", ":4: kind:"),
    ("---\nerror: x\ncode_hash: abc\nsolutions:\n  - ''\n---\n", ":4: solutions: Value error, has an empty item"),
    ("no front matter\n", ":1: a note starts with YAML front matter"),
    ("---\nerror: x\n---\n", ":2: code_hash: Field required"),
]


@pytest.mark.parametrize(("text", "says"), MALFORMED, ids=["yaml", "unknown-key", "bad-kind", "empty-item", "no-front-matter", "missing-hash"])
def test_malformed_note_names_file_line_and_fault(text, says):
    with pytest.raises(UserError) as caught:
        parse_note("annotations/0123456789abcdef.md", text)
    assert str(caught.value).startswith("annotations/0123456789abcdef.md:")
    assert says in str(caught.value)


def test_note_file_must_be_named_by_an_id():
    with pytest.raises(UserError, match="16-hex id"):
        parse_note("annotations/my-note.md", "---\nerror: x\ncode_hash: abc\n---\n")
