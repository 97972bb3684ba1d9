"""Curated notes: they win over derived text, go stale when the code changes, and a malformed one fails loudly."""

from __future__ import annotations

import html
import re
from pathlib import Path

import markdown
import pytest
import yaml
from fixture_repo import make_repo

from vllm_errors.catalog import build_catalog
from vllm_errors.cli import main
from vllm_errors.knowledge import build_knowledge_base
from vllm_errors.markup import safe_markdown
from vllm_errors.model import Annotation, ExampleFix, Snapshot, UserError
from vllm_errors.notes import check_notes, code_hash, curated_annotator, parse_note
from vllm_errors.pipeline import annotate_catalog
from vllm_errors.render import render_pages
from vllm_errors.scanner import scan_module

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



def test_a_field_the_note_writes_empty_stays_empty_and_one_it_leaves_out_is_derived():
    catalog = catalog_of(CODE)
    (error,) = catalog.errors
    fix = ExampleFix(before="vllm serve MODEL --flag VALUE", after="vllm serve MODEL", language="shell")
    derived = lambda e: Annotation(meaning="derived", triggers=("derived trigger",), situations=("Calls reach it from f.",),
                                   example_fix=fix, sources={"meaning": "derived", "triggers": "derived", "situations": "derived", "example_fix": "derived"})
    silent = parse_note(f"annotations/{error.id}.md", note_text(error, situations="[]", example_fix="null"))
    kb = build_knowledge_base(catalog, (derived, curated_annotator({silent.id: silent}, {error.id: error})))
    annotation = kb.records[0].annotation
    assert (annotation.situations, annotation.example_fix) == ((), None)  # the writer found none: nothing is filled in
    assert annotation.sources["situations"] == annotation.sources["example_fix"] == "curated"
    assert annotation.triggers == ("derived trigger",)  # not written at all: derived
    quiet = parse_note(f"annotations/{error.id}.md", note_text(error))
    kb = build_knowledge_base(catalog, (derived, curated_annotator({quiet.id: quiet}, {error.id: error})))
    assert kb.records[0].annotation.situations == ("Calls reach it from f.",) and kb.records[0].annotation.example_fix == fix


def test_a_note_that_writes_kind_unknown_keeps_it_and_one_that_leaves_kind_out_keeps_the_derived_kind():
    catalog = catalog_of(CODE)
    (error,) = catalog.errors
    derived = lambda e: Annotation(meaning="derived", kind="user", sources={"meaning": "derived"})
    kinds = {}
    for name, extra in (("written", {"kind": "unknown"}), ("left out", {})):
        note = parse_note(f"annotations/{error.id}.md", note_text(error, **extra))
        kb = build_knowledge_base(catalog, (derived, curated_annotator({note.id: note}, {error.id: error})))
        kinds[name] = kb.records[0].annotation.kind
    assert kinds == {"written": "unknown", "left out": "user"}


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



def test_a_note_naming_a_flag_or_variable_the_release_lacks_is_reported():
    (error,) = catalog_of(CODE).errors
    text = note_text(error, example_fix="{before: 'vllm serve m --made-up 1', after: 'vllm serve m --max_model_len 8', language: shell}")
    text = text.replace("Pass fewer items.", "'Pass `--max-model-len 8192` or `--no-enforce-eager`, set `VLLM_GONE=1`, or `docker run --shm-size 8g`.'")
    note = parse_note(f"annotations/{error.id}.md", text)
    declared = {"--max-model-len", "--enforce-eager"}
    report = check_notes({note.id: note}, {error.id: error}, declared, {"VLLM_KEPT"})
    # `--no-x` is `--x`'s negation, `--max_model_len` its spelling with underscores, `docker`'s option is not vLLM's
    assert report.unknown_settings == (f"annotations/{error.id}.md: --made-up, VLLM_GONE",)
    assert check_notes({note.id: note}, {error.id: error}, declared | {"--made-up"}, {"VLLM_GONE"}).unknown_settings == ()
    assert check_notes({note.id: note}, {}, declared, set()).unknown_settings == ()  # an orphan is reported as that
    assert check_notes({note.id: note}, {error.id: error}).unknown_settings == ()  # no settings known: not checked


def test_a_note_whose_solution_is_to_report_it_is_named():
    (error,) = catalog_of(CODE).errors
    for solution, named in (("Report it to vLLM with the traceback.", True), ("Open an issue on GitHub.", True),
                            ("Set `--x 1`; the log reports it as y.", False), ("Pass fewer items.", False)):
        note = parse_note(f"annotations/{error.id}.md", note_text(error).replace("Pass fewer items.", solution))
        assert check_notes({note.id: note}, {error.id: error}).reporting == ((note.file,) if named else ()), solution


def test_report_lists_notes_naming_settings_the_release_lacks(tmp_path, capsys):
    release = make_repo(tmp_path / "repo", {"v1": {"vllm/m.py": CODE, "vllm/engine/arg_utils.py": (
        "class EngineArgs:\n    def add_cli_args(parser):\n        parser.add_argument('--max-model-len', type=int)\n")}})
    (error,) = catalog_of(CODE).errors
    note = note_text(error).replace("Pass fewer items.", "'Set `--max-model-len 8` or `--max-num-seqs 4`.'")
    annotations = write_annotations(tmp_path / "annotations", {f"{error.id}.md": note})
    assert main(["report", "--repo", str(release), "--ref", "v1", "--annotations", str(annotations), "--cache-dir", str(tmp_path / "cache")]) == 0
    out = capsys.readouterr().out
    assert "naming settings the release lacks: 1" in out
    assert f"unknown settings: annotations/{error.id}.md: --max-num-seqs" in out

MALFORMED = [
    ("---\nerror: x\ncode_hash: abc\nsolutions: [unclosed\n---\nbody\n", ":5: invalid YAML"),
    ("---\nerror: x\ncode_hash: abc\nsolution: typo\n---\n", ":4: solution: Extra inputs are not permitted"),
    ("---\nerror: x\ncode_hash: abc\nkind: fatal\n---\n", ":4: kind:"),
    ("---\nerror: x\ncode_hash: abc\nsolutions:\n  - ''\n---\n", ":4: solutions: Value error, has an empty item"),
    ("no front matter\n", ":1: a note starts with YAML front matter"),
    ("---\nerror: x\n---\n", ":2: code_hash: Field required"),
    ("---\nerror: x\ncode_hash: abc\nerror: y\n---\n", ":4: duplicate key 'error': give each key once"),
    ("---\nerror: x\ncode_hash: abc\nexample_fix:\n  before: a\n  after: b\n  before: c\n---\n", ":7: duplicate key 'before'"),
    ("---\n---\n", ":2: the front matter is empty: give at least error: and code_hash:"),
    ("---\nerror: x\ncode_hash: abc\ntriggers:\n  - fine\n  - 3\n---\n", ":6: triggers.1: Input should be a valid string"),
    ("---\nerror: x\x01\ncode_hash: abc\n---\n", ":2: character U+0001 is not allowed in YAML"),
]


@pytest.mark.parametrize(
    ("text", "says"),
    MALFORMED,
    ids=["yaml", "unknown-key", "bad-kind", "empty-item", "no-front-matter", "missing-hash", "duplicate-key", "nested-duplicate-key", "empty-front-matter", "item-not-text", "control-character"],
)
def test_malformed_note_names_file_line_and_fault(text, says):
    with pytest.raises(UserError) as caught:
        parse_note("annotations/0123456789abcdef.md", text)
    assert str(caught.value).startswith("annotations/0123456789abcdef.md:")
    assert says in str(caught.value)


def test_note_file_must_be_named_by_an_id():
    with pytest.raises(UserError, match="16-hex id"):
        parse_note("annotations/my-note.md", "---\nerror: x\ncode_hash: abc\n---\n")


# --- hostile annotations: one line naming the file, the line and the fault; never a traceback ------------------

NOTE = "0123456789abcdef.md"
GOOD_TERM = "- term: Limit\n  pattern: 'too many'\n  definition: The most there may be.\n"
HOSTILE_FILES = [
    ({NOTE: b"---\nerror: x\ncode_hash: abc\n---\nfine\nnot \xff UTF-8\n"}, f"annotations/{NOTE}:6: byte 0xff is not UTF-8: save the file as UTF-8"),
    ({NOTE: None}, f"annotations/{NOTE}: is a directory, not a file: rename or remove it"),
    ({NOTE: "---\nerror: x\ncode_hash: abc\nkind: user\nkind: internal\n---\n"}, f"annotations/{NOTE}:5: duplicate key 'kind': give each key once"),
    ({NOTE: "---\n---\n"}, f"annotations/{NOTE}:2: the front matter is empty"),
    ({"glossary.yaml": GOOD_TERM + "- term: Paren\n  pattern: '('\n  definition: d\n"}, "annotations/glossary.yaml:5: pattern: Value error, not a regular expression"),
    ({"glossary.yaml": GOOD_TERM + "- term: List\n  pattern: [1]\n  definition: d\n"}, "annotations/glossary.yaml:5: pattern: Input should be a valid string"),
    ({"glossary.yaml": GOOD_TERM + "- term: Short\n  pattern: short\n"}, "annotations/glossary.yaml:4: definition: Field required: add it"),
    ({"glossary.yaml": GOOD_TERM + "- term: Twice\n  pattern: a\n  pattern: b\n  definition: d\n"}, "annotations/glossary.yaml:6: duplicate key 'pattern': give each key once"),
    ({"glossary.yaml": GOOD_TERM + "- term: limit\n  pattern: lim\n  definition: d\n"}, "annotations/glossary.yaml:4: the term 'limit' is defined already at line 1"),
    ({"glossary.yaml": b"- term: A\n  pattern: a\n  definition: caf\xe9\n"}, "annotations/glossary.yaml:3: byte 0xe9 is not UTF-8"),
    ({"glossary.yaml": "term: A\npattern: a\n"}, "annotations/glossary.yaml:1: the glossary must be a list of entries"),
    ({"glossary.yaml": None}, "annotations/glossary.yaml: is a directory, not a file"),
    ({"outside.yaml": "- name: x\n  message: a\n  says: s\n  says: t\n"}, "annotations/outside.yaml:4: duplicate key 'says'"),
]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return make_repo(tmp_path_factory.mktemp("repo"), {"v1": {"vllm/m.py": CODE}})


def write_annotations(directory: Path, files: dict[str, str | bytes | None]) -> Path:
    directory.mkdir()
    for name, content in files.items():
        path = directory / name
        if content is None:
            path.mkdir()
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return directory


@pytest.mark.parametrize(
    ("files", "says"),
    HOSTILE_FILES,
    ids=["note-not-utf8", "note-is-a-directory", "note-duplicate-key", "note-empty-front-matter", "glossary-bad-regex",
         "glossary-pattern-not-text", "glossary-missing-field", "glossary-duplicate-key", "glossary-duplicate-term",
         "glossary-not-utf8", "glossary-not-a-list", "glossary-is-a-directory", "outside-duplicate-key"],
)
def test_hostile_annotations_fail_in_one_line_with_file_and_line(release, tmp_path, capsys, files, says):
    annotations = write_annotations(tmp_path / "annotations", files)
    code = main(["report", "--repo", str(release), "--ref", "v1", "--annotations", str(annotations), "--cache-dir", str(tmp_path / "cache")])
    err = capsys.readouterr().err
    assert (code, err.count("\n"), "Traceback" in err) == (2, 1, False), err
    assert err.startswith(f"vllm-errors: error: {says}"), err


# --- contributed Markdown is made safe, and stays Markdown ---------------------------------------------------


def site_html(text: str) -> str:
    """`text` as the site renders it: Python-Markdown with mkdocs.yml's extensions."""
    extensions, configs = [], {}
    for entry in yaml.safe_load((Path(__file__).parent.parent / "mkdocs.yml").read_text())["markdown_extensions"]:
        name, config = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
        extensions.append(name)
        configs[name] = config
    return markdown.markdown(text, extensions=extensions, extension_configs=configs)


def live_markup(rendered: str) -> list[str]:
    """What in some HTML could run or load something: script-like elements, event handlers, script and data URLs."""
    found = re.findall(r"<(script|iframe|style|svg|math|object|embed)\b", rendered, re.I)
    found += re.findall(r"<[^>]*\s(on\w+)\s*=", rendered, re.I)
    urls = re.sub(r"[\x00-\x20]", "", html.unescape(" ".join(re.findall(r"(?:href|src)\s*=\s*(\"[^\"]*\"|'[^']*'|[^\s>]+)", rendered, re.I))))
    return found + re.findall(r"(?i)javascript:|vbscript:|data:", urls)


KEPT = [
    pytest.param("a < b && c > d, a<b", id="comparisons"),
    pytest.param("x<y then <b>bold</b> & a<b", id="comparisons-beside-html"),
    pytest.param("`a < b && <x>` and ``<script>alert(1)</script>``", id="code-spans"),
    pytest.param("```python\nif a < b and '<script>':\n    pass\n```", id="fenced"),
    pytest.param("**bold** _em_ [link](https://example.com) <https://example.com> [mail](mailto:a@example.com)", id="inline"),
    pytest.param("> a quote\n\n- a list\n- with `code`\n\n1. and numbers", id="blocks"),
    pytest.param("<kbd>Ctrl</kbd>+<kbd>C</kbd> & more", id="allowed-html"),
    pytest.param("| a | b |\n|:--|--:|\n| 1 | 2 |", id="table"),
    pytest.param("[ref][r]\n\n[r]: https://example.com", id="reference"),
]


@pytest.mark.parametrize("text", KEPT)
def test_safe_markdown_renders_benign_markdown_unchanged(text):
    assert site_html(safe_markdown(text)) == site_html(text)


HOSTILE_MARKDOWN = [
    pytest.param("<script>alert(1)</script>", id="script"),
    pytest.param("<img src=x onerror=alert(1)>", id="onerror"),
    pytest.param("[x](javascript:alert(1))", id="js-link"),
    pytest.param("[x](JaVa&#83;cript:alert(1))", id="js-link-entity"),
    pytest.param("![x](javascript:alert(1))", id="js-image"),
    pytest.param("[x](data:text/html;base64,PHNjcmlwdD4=)", id="data-link"),
    pytest.param("[r]\n\n[r]: javascript:alert(1)", id="js-reference"),
    pytest.param("<a href='java&#9;script:alert(1)'>x</a>", id="js-html-link"),
    pytest.param("<iframe src=https://example.com></iframe><style>body{display:none}</style>", id="iframe-style"),
    pytest.param('**b**{ onclick="alert(1)" }', id="attr-list"),
    pytest.param("<svg><script>alert(1)</script></svg>", id="svg"),
    pytest.param("<div markdown=1>*x* <img src=x onerror=alert(1)></div>", id="md-in-html"),
    pytest.param("\\`<img src=x onerror=alert(1)>\\`", id="escaped-backticks"),
]


@pytest.mark.parametrize("text", HOSTILE_MARKDOWN)
def test_safe_markdown_leaves_nothing_live(text):
    assert live_markup(site_html(text)), "the case is not hostile: it tests nothing"
    assert live_markup(site_html(safe_markdown(text))) == []


def test_what_the_steps_miss_is_refused_by_rendering():
    # The entity becomes a backtick that pairs with the span's: the script moves out of code.
    text = "&#96;<b>x</b>`<script>alert(1)</script>`"
    with pytest.raises(ValueError, match=r"renders to markup a page may not hold \(<script>\)"):
        safe_markdown(text)
    with pytest.raises(UserError, match=rf"^annotations/{NOTE}:5: meaning: renders to markup"):
        parse_note(f"annotations/{NOTE}", f"---\nerror: x\ncode_hash: abc\n---\n{text}\n")


def test_a_hostile_note_and_glossary_render_without_live_markup(tmp_path):
    catalog = catalog_of(CODE)
    (error,) = catalog.errors
    hostile = "<script>alert(1)</script> **bold** <img src=x onerror=alert(1)> `code` [x](javascript:alert(1)) [link](https://example.com)"
    note = f"---\nerror: x\ncode_hash: {code_hash(error)}\ntriggers:\n  - '{hostile}'\n  - '<script>alert(2)</script>'\n---\n{hostile}\n"
    glossary = f"- term: Limit\n  pattern: 'too many'\n  definition: '{hostile} <iframe src=https://example.com></iframe>'\n"
    annotations = write_annotations(tmp_path / "annotations", {f"{error.id}.md": note, "glossary.yaml": glossary})
    kb, _, _ = annotate_catalog(catalog, annotations)
    assert kb.records[0].annotation.triggers[1:] == ()  # nothing left of the second: no empty bullet
    page = site_html(render_pages(kb)[f"errors/{error.id}.md"])
    assert live_markup(page) == []
    for kept in ("<strong>bold</strong>", "<code>code</code>", '<a href="https://example.com">link</a>'):
        assert page.count(kept) >= 3, kept  # the trigger, the meaning and the glossary's definition


def test_the_check_renders_with_the_sites_extensions():
    from vllm_errors.markup import _EXTENSIONS

    site = [next(iter(e)) if isinstance(e, dict) else e for e in yaml.safe_load((Path(__file__).parent.parent / "mkdocs.yml").read_text())["markdown_extensions"]]
    assert set(site) - {"toc"} == set(_EXTENSIONS)  # toc only adds the site's own ids and permalinks to headings


def test_a_note_follows_its_error_through_a_rewording_flagged_stale():
    from vllm_errors.history import build_history
    from vllm_errors.notes import follow_rewordings

    (old,) = catalog_of(CODE).errors
    note = parse_note(f"annotations/{old.id}.md", note_text(old))
    from dataclasses import replace

    releases = [replace(catalog_of(code), snapshot=replace(SNAP, ref=ref))
                for code, ref in ((CODE, "v1"), (CODE.replace("too many", "too many items"), "v2"))]
    history = build_history(releases)
    (new,) = releases[1].errors
    assert new.id != old.id and history.errors[new.id].supersedes == (old.id,)
    notes = follow_rewordings({note.id: note}, history.errors)
    errors = {old.id: old, new.id: new}
    annotation = curated_annotator(notes, errors)(new)
    assert annotation.solutions == ("Pass fewer items.",) and annotation.stale  # carried, and flagged: the code changed
    assert check_notes(notes, errors).stale == (
        f"annotations/{old.id}.md (its error was reworded into {new.id}: rename it annotations/{new.id}.md)",)
    # an error with a note of its own keeps it
    own = parse_note(f"annotations/{new.id}.md", note_text(new).replace("Pass fewer items.", "Its own."))
    assert follow_rewordings({note.id: note, own.id: own}, history.errors)[new.id] is own
