"""The renderer: escaping filters as example tables, golden pages, determinism, and a real mkdocs build of hostile text.

Regenerate the goldens (never edit them by hand) with:

    UPDATE_GOLDENS=1 .venv/bin/pytest tests/test_render.py
"""

from __future__ import annotations

import html
import json
import os
import random
import re
import shutil
import subprocess
from html.parser import HTMLParser
from dataclasses import replace
from pathlib import Path

import markdown
import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from vllm_errors import render
from vllm_errors.search import index_site
from vllm_errors.model import (
    Annotation,
    Assignment,
    Code,
    Condition,
    ErrorRecord,
    ExampleFix,
    ExceptionRef,
    GlossaryTerm,
    KnowledgeBase,
    Message,
    RaiseSite,
    Snapshot,
    record_to_data,
)

from pagefind_index import indexed_pages

ROOT = Path(__file__).resolve().parent.parent
GOLDENS = Path(__file__).parent / "goldens"
UPDATE = bool(os.environ.get("UPDATE_GOLDENS"))

SNAP = Snapshot(
    repository="vllm-project/vllm",
    ref="v0.33.0",
    commit="e9eddc760edd40b81b314bd76bfe056730901903",
    date="2026-11-02T10:12:56+00:00",
    upstream_commit="4ba787ec9",
    version="0.33.0",
)

# Everything a message, a path or a piece of code can throw at a Markdown page.
HOSTILE = (
    "# heading <script>alert(1)</script> `tick` ``double`` a | b {{ x }} {% raw %}\n"
    "---\n"
    '[x](javascript:alert(1)) *emphasis* _under_ <img src=x onerror=alert(1)> &amp; \\ ~~~ ``` { onclick="alert(1)" }'
)
CODE_ONLY = "code_context_only_token"  # appears in code contexts and nowhere else: must stay out of search


# --- a small knowledge base, built by hand -----------------------------------------------------------


def site(path, line, function, template, *, guard=(), assignments=(), exception="ValueError", qualname=None,
         how="call", kind="raise", placeholders=(), code_text=None, first_line=None, end_line=None, note=None, function_doc=None):
    code_text = code_text or f"def {function.split('.')[-1]}():\n    {CODE_ONLY} = 1\n    raise {exception}('...')\n"
    return RaiseSite(
        path=path,
        line=line,
        end_line=end_line or line,
        function=function,
        function_doc=function_doc,
        kind=kind,
        exception=ExceptionRef(written=exception, qualname=exception if qualname is None else qualname, how=how),
        message=Message(template=template, placeholders=placeholders, form="fstring" if placeholders else "literal", pattern=None, note=note),
        guard=tuple(guard),
        assignments=tuple(assignments),
        cause=None,
        code=Code(first_line=first_line or line - 2, text=code_text),
    )


def record(id, exception, template, sites, *, title=None, annotation=Annotation(), related=(), hierarchy=None, subsystem=None, kind="raise"):
    return ErrorRecord(
        id=id,
        exception=exception,
        template=template,
        kind=kind,
        placeholders=sites[0].message.placeholders,
        pattern=None,
        sites=tuple(sites),
        title=title or f"{render.short_name(exception)}: {' '.join((template or '').split())}",
        subsystem=subsystem or "/".join(sites[0].path.split("/")[1:-1][:2]) or "vllm",
        hierarchy=hierarchy or (exception,),
        annotation=annotation,
        related=tuple(related),
        url=f"errors/{id}.html",
        snapshot=SNAP,
    )


FULL = record(
    "1111111111111111",
    "vllm.exceptions.VLLMValidationError",
    "max_model_len {self.max_model_len} exceeds the model's {derived}",
    [
        site(
            "vllm/config/model.py",
            412,
            "ModelConfig.verify",
            "max_model_len {self.max_model_len} exceeds the model's {derived}",
            exception="VLLMValidationError",
            qualname="vllm.exceptions.VLLMValidationError",
            placeholders=("self.max_model_len", "derived"),
            guard=[
                Condition("if", "self.max_model_len is not None", True, 404),
                Condition("elif", "self.enforce", False, 406),
                Condition("else", "self.allow_long", False, 408),
                Condition("for", "name in names", True, 409),
                Condition("while", "pending", True, 410),
                Condition("except", "(KeyError, ValueError)", True, 411),
                Condition("case", "mode matches 'strict'", True, 0),
                Condition("if", "(\n    self.max_model_len\n    > derived\n)", True, 411),
            ],
            assignments=[Assignment("derived", "derived = _get_and_verify_max_len(\n    self.hf_config,\n)", 400)],
            code_text="".join(f"    line_{n} = {n}  # {CODE_ONLY}\n" for n in range(398, 412))
            + '    raise VLLMValidationError(\n        f"max_model_len {self.max_model_len} exceeds the model\'s {derived}"\n    )\n',
            first_line=398,
            end_line=414,
            function_doc="Check `max_model_len` against the model's limit.",
        )
    ],
    annotation=Annotation(
        meaning="The requested `--max-model-len` is longer than the model supports. vLLM checks it at start-up.",
        triggers=("Passing `--max-model-len` above the model's `max_position_embeddings`.",),
        situations=("Copying a serve command from a\nlonger-context model.", "A config file that sets `max_model_len`."),
        solutions=("Lower `--max-model-len`.", "Set `VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`\nif you know the model handles it."),
        example_fix=ExampleFix(before="vllm serve m --max-model-len 200000", after="vllm serve m --max-model-len 32768", language="shell"),
        kind="user",
        sources={"kind": "ai", "meaning": "curated", "triggers": "derived", "situations": "ai", "solutions": "ai", "example_fix": "curated"},
        stale=True,
    ),
    related=("2222222222222222", "3333333333333333", "ffffffffffffffff"),  # the last is unknown: left out
    hierarchy=("vllm.exceptions.VLLMValidationError", "vllm.exceptions.VLLMClientError", "vllm.exceptions.VLLMError", "Exception"),
)

FULL = replace(FULL, terms=(GlossaryTerm(term="Max model length", pattern="max_model_len", definition="The longest sequence the engine accepts (`--max-model-len`)."),))

MANY = record(
    "2222222222222222",
    "AssertionError",
    None,
    [
        site(f"vllm/v1/worker/runner_{n}.py", 10 * n + 5, f"Runner{n}.step", None, kind="assert", exception="AssertionError",
             how="assert", note="the message is computed at run time from `msg`",
             guard=[Condition("assert", f"batch.size == {n}", False, 10 * n + 5)])
        for n in range(5)
    ],
    title="AssertionError with a computed message in Runner0.step",
    kind="assert",
    annotation=Annotation(kind="internal", sources={"kind": "derived"}),
    related=("1111111111111111",),
)

HOSTILE_RECORD = record(
    "3333333333333333",
    'make_error("<script>alert(2)</script>")',
    HOSTILE,
    [
        site(
            "vllm/evil/a_b*c`d|e.py",
            7,
            "Evil.`f`<i>",
            HOSTILE,
            exception='make_error("<script>alert(2)</script>")',
            qualname="",
            how="factory",
            guard=[Condition("if", 'x == "`|`" and "<b>"', True, 6)],
            assignments=[Assignment("x", 'x = """\n```\n</code></pre><script>alert(3)</script>\n"""', 3)],
            code_text=f"def f():  # {CODE_ONLY}\n```\n~~~\n    </code></pre><script>alert(4)</script>\n    raise x\n",
            first_line=3,
        )
    ],
    related=("1111111111111111", "2222222222222222"),
)


def kb(records=(FULL, MANY, HOSTILE_RECORD)) -> KnowledgeBase:
    return KnowledgeBase(snapshot=SNAP, records=tuple(records), exception_classes=(), files=3)


# --- filters: example tables ---------------------------------------------------------------------------


def markdown_converter() -> markdown.Markdown:
    """Python-Markdown with the extensions and settings of the site's mkdocs.yml."""
    extensions, configs = [], {}
    for entry in yaml.safe_load((ROOT / "mkdocs.yml").read_text())["markdown_extensions"]:
        name, config = next(iter(entry.items())) if isinstance(entry, dict) else (entry, {})
        extensions.append(name)
        configs[name] = config
    return markdown.Markdown(extensions=extensions, extension_configs=configs)


CONVERTER = markdown_converter()


def to_html(text: str) -> str:
    CONVERTER.reset()
    return CONVERTER.convert(text)


PLAIN_TEXT = [
    pytest.param("<script>alert(1)</script>", id="script"),
    pytest.param("`tick` ``double``", id="backticks"),
    pytest.param("a | b", id="pipe"),
    pytest.param("{{ x }} {% raw %}", id="jinja"),
    pytest.param("[x](javascript:alert(1))", id="js-link"),
    pytest.param("# heading", id="leading-hash"),
    pytest.param("*emphasis* _under_ __strong__", id="emphasis"),
    pytest.param("line\n---\nmore", id="rule-line"),
    pytest.param("> quote", id="blockquote"),
    pytest.param("1. item", id="ordered-list"),
    pytest.param("+ plus", id="plus-list"),
    pytest.param("a\\b\\", id="backslashes"),
    pytest.param("&amp; &copy; &#x27;", id="entities"),
    pytest.param('title { onclick="alert(1)" }', id="attr-list"),
    pytest.param("<http://x.y> ![i](x.png)", id="autolink-image"),
    pytest.param("<!-- c -->", id="comment"),
    pytest.param("#!python x", id="inlinehilite-shebang"),
    pytest.param(":::python x", id="inlinehilite-colons"),
    pytest.param("`", id="lone-backtick"),
    pytest.param("a  \t b\n", id="white-space"),
]


@pytest.mark.parametrize("text", PLAIN_TEXT)
def test_md_renders_as_the_text_itself(text):
    assert to_html(render.md(text)) == f"<p>{html.escape(render.fold(text), quote=False)}</p>"


@pytest.mark.parametrize("text", PLAIN_TEXT)
def test_code_renders_as_one_code_span_of_the_text(text):
    assert to_html(render.code(text)) == f"<p><code>{html.escape(render.fold(text), quote=False)}</code></p>"


@pytest.mark.parametrize("text", PLAIN_TEXT)
def test_md_and_code_keep_a_table_row_whole(text):
    row = f"| {render.md(text)} | {render.code(text)} |"
    out = to_html(f"| a | b |\n|---|---|\n{row}")
    assert out.count("<td>") == 2 and html.escape(render.fold(text), quote=False) in out


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab #*_`|\\[](){}<>&!-+.:~=^\n\"'1")), max_size=30))
@example("&#1")
def test_md_and_code_are_literal_for_any_text(text):
    shown = html.escape(render.fold(text), quote=False)
    assert to_html(render.md(text)) == (f"<p>{shown}</p>" if shown else "")
    # Python-Markdown completes a numeric reference in a code span (`&#1` shows as `&#1;`): cosmetic, left alone.
    if shown and not re.search(r"&#", text):
        assert to_html(render.code(text)) == f"<p><code>{shown}</code></p>"


def test_documentation_keeps_its_code_spans_and_nothing_else():
    from vllm_errors.markup import doc_md

    assert to_html(doc_md("Return ``(normed | None, x)``, shaped `[T, 6144]` *as is*.")) == (
        "<p>Return <code>(normed | None, x)</code>, shaped <code>[T, 6144]</code> *as is*.</p>")
    assert to_html(doc_md("a lone ` backtick <b>")) == "<p>a lone ` backtick &lt;b&gt;</p>"


FENCES = [
    pytest.param("x = 1", "```", id="plain"),
    pytest.param("```\ninside\n```", "````", id="triple-inside"),
    pytest.param("a ````` b", "``````", id="long-run"),
    pytest.param("~~~\n~~~~", "```", id="tildes-need-nothing"),
]


@pytest.mark.parametrize("text, fence", FENCES)
def test_fenced_picks_a_fence_longer_than_any_run(text, fence):
    block = render.fenced(text, "python")
    assert block == f"{fence}python\n{text}\n{fence}"
    out = to_html(block + "\n\nafter")
    assert out.endswith("<p>after</p>") and html.unescape(re.sub(r"<[^>]+>", "", out)) == f"{text}\n\nafter"


YAML_VALUES = [
    pytest.param('ValueError: "quoted" and \\ back', id="quotes"),
    pytest.param("a: b # not a comment", id="colon-hash"),
    pytest.param("line\nbreak\ttab", id="control"),
    pytest.param("\x7f\x85\u2028\u2029\ufeff\U0001f600 é", id="non-printable"),
    pytest.param("--- !!python/object:os.system", id="tags"),
]


@pytest.mark.parametrize("value", YAML_VALUES)
def test_yaml_string_round_trips(value):
    assert yaml.safe_load(f"title: {render.yaml_string(value)}") == {"title": value}


@pytest.mark.parametrize("value", YAML_VALUES + [pytest.param("<script>alert(1)</script>", id="html")])
def test_meta_is_html_escaped_yaml(value):
    loaded = yaml.safe_load(f"title: {render.meta(value)}")["title"]
    assert loaded == html.escape(render.fold(value), quote=True) and "<" not in loaded


URLS = [
    pytest.param("vllm/a b/c#d?.py", "/", "vllm/a%20b/c%23d%3F.py", id="path"),
    pytest.param("x (y)&z=1\n", "", "x%20%28y%29%26z%3D1%0A", id="query"),
]


@pytest.mark.parametrize("text, safe, expected", URLS)
def test_url_quotes(text, safe, expected):
    assert render.url(text, safe) == expected


ONE_LINE = [
    pytest.param("a and b", "a and b", id="single"),
    pytest.param('use_mla and (\n    x != "naive"\n    and y\n)', 'use_mla and (x != "naive" and y)', id="parens"),
    pytest.param("f(\n    a,\n    b,\n)", "f(a, b,)", id="call"),
    pytest.param("a\n\n  or b", "a or b", id="blank-lines"),
]


@pytest.mark.parametrize("source, expected", ONE_LINE)
def test_one_line(source, expected):
    assert render.one_line(source) == expected


CONDITIONS = [
    pytest.param(Condition("if", "x > 1", True, 4), "line 4: `if` `x > 1` must be **true**", id="if"),
    pytest.param(Condition("elif", "y", False, 6), "line 6: `elif` `y` must be **false**", id="elif-false"),
    pytest.param(Condition("else", "z", False, 8), "line 8: `else` branch: `z` must be **false**", id="else"),
    pytest.param(Condition("while", "pending", True, 9), "line 9: `while` `pending` must be **true**", id="while"),
    pytest.param(Condition("exit", "cache is None", False, 7), "line 7: `if` `cache is None` must be **false**, or the code leaves before the raise", id="early-exit"),
    pytest.param(Condition("for", "a in b", True, 2), "line 2: inside the loop `for a in b`", id="for"),
    pytest.param(Condition("except", "(KeyError, OSError)", True, 3), "line 3: inside `except (KeyError, OSError)`", id="except"),
    pytest.param(Condition("case", "m matches _", True, 0), "`case` `m matches _`", id="case-no-line"),
    pytest.param(Condition("assert", "n == 1", False, 5), "line 5: `assert` `n == 1` fails: it must be **false**", id="assert"),
    pytest.param(Condition("if", "a == '`'", True, 1), "line 1: `if` ``a == '`'`` must be **true**", id="backtick"),
]


@pytest.mark.parametrize("condition, expected", CONDITIONS)
def test_condition(condition, expected):
    assert render.condition(condition) == expected


CHAINS = [
    pytest.param(("ValueError",), ("ValueError", "Exception"), id="builtin"),
    pytest.param(("KeyboardInterrupt",), ("KeyboardInterrupt", "BaseException"), id="base-exception"),
    pytest.param(("FileNotFoundError",), ("FileNotFoundError", "OSError", "Exception"), id="deep-builtin"),
    pytest.param(("vllm.x.E", "vllm.x.Base", "Exception"), ("vllm.x.E", "vllm.x.Base", "Exception"), id="vllm"),
    pytest.param(("fastapi.HTTPException",), ("fastapi.HTTPException",), id="third-party"),
]


@pytest.mark.parametrize("chain, expected", CHAINS)
def test_class_chain(chain, expected):
    assert render.class_chain(chain) == expected


TYPES = [
    pytest.param("ValueError", "builtin", "valueerror", id="builtin"),
    pytest.param("vllm.exceptions.VLLMError", "vllm", "vllm.exceptions.vllmerror", id="vllm"),
    pytest.param("asyncio.CancelledError | GeneratorExit", "other", "asyncio.cancellederror--generatorexit", id="union"),
    pytest.param("fastapi.HTTPException", "other", "fastapi.httpexception", id="third-party"),
    pytest.param('make("x")', "other", None, id="computed"),
]


@pytest.mark.parametrize("exception, family, slug", TYPES)
def test_type_family_and_slug(exception, family, slug):
    assert render.type_family(exception) == family
    if slug:
        assert render.type_slug(exception) == slug and slug not in render.FAMILY_PAGES


SUBSYSTEM_SLUGS = [
    pytest.param("config", "config", id="plain"),
    pytest.param("v1/worker", "v1-worker", id="nested"),
    pytest.param("distributed/kv_transfer", "distributed-kv_transfer", id="underscore"),
    pytest.param("a/b", "a-b", id="a/b"),
    pytest.param("a-b", "a~2db", id="a-b-stays-apart-from-a/b"),
    pytest.param("index", "index~", id="index-is-the-overview"),
    pytest.param("index/sub", "index-sub", id="index-nested"),
    pytest.param("Models", "~4dodels", id="capital"),
    pytest.param("a.b", "a~2eb", id="dot"),
    pytest.param("café", "caf~c3~a9", id="non-ascii"),
    pytest.param("x~2d", "x~7e2d", id="tilde"),
]


@pytest.mark.parametrize("subsystem, slug", SUBSYSTEM_SLUGS)
def test_subsystem_slug(subsystem, slug):
    assert render.subsystem_slug(subsystem) == slug


TYPE_SLUGS = [
    pytest.param(["ValueError", "vllm.exceptions.VLLMError"], ["valueerror", "vllm.exceptions.vllmerror"], id="ordinary"),
    pytest.param(["Index", "Other_Builtin"], ["index~", "other_builtin"], id="reserved"),
    pytest.param(["vllm.Foo", "vllm.foo", "vllm.FOO"], ["vllm.~46oo", "vllm.foo", "vllm.~46~4f~4f"], id="case-twins"),
    pytest.param(["Index", "index"], ["~49ndex", "index~"], id="case-twins-reserved"),
    pytest.param(["vllm.Ä", "vllm.ä"], ["vllm.~c3~84", "vllm.~c3~a4"], id="non-ascii-keeps-case"),
]


@pytest.mark.parametrize("types, slugs", TYPE_SLUGS)
def test_type_slugs(types, slugs):
    assert render.type_slugs(types) == dict(zip(types, slugs))


NAMES = st.text(st.sampled_from("aAbB0_-/.~é|"), min_size=1, max_size=6)
DOTTED = st.from_regex(r"[A-Za-z_é][\wé.]{0,4}( \| [A-Za-z_][\w.]{0,3})?", fullmatch=True).filter(render.is_dotted)


def distinct_files(slugs: list[str]) -> bool:
    """No two slugs name the same file, even where file names ignore case, and none an overview's."""
    return len({s.lower() for s in slugs}) == len(slugs) and not set(slugs) & (render.RESERVED_PAGES | render.FAMILY_PAGES)


@given(st.lists(NAMES, unique=True))
def test_subsystems_never_share_a_page(names):
    assert distinct_files([render.subsystem_slug(n) for n in names])


@given(st.lists(DOTTED, unique=True))
def test_types_never_share_a_page_and_keep_their_slugs_unless_they_differ_only_in_case(names):
    slugs = render.type_slugs(names)
    assert distinct_files(list(slugs.values()))
    for name in names:
        if sum(render.type_slug(other) == render.type_slug(name) for other in names) == 1:
            assert slugs[name] == render.type_slug(name)


def colliding_kb() -> KnowledgeBase:
    """The names that once overwrote pages: a subsystem `index`, a type `Index` with a page of its own, `a/b` and `a-b`."""
    records = [record(f"{n:016x}", "Index", f"index error {n}", [site(f"vllm/index/m{n}.py", 5, "f", f"index error {n}", exception="Index")])
               for n in range(render.TYPE_PAGE_MIN)]
    records += [record("aaaaaaaaaaaaaaa1", "ValueError", "under a/b", [site("vllm/a/b/x.py", 3, "g", "under a/b")]),
                record("aaaaaaaaaaaaaaa2", "ValueError", "under a-b", [site("vllm/a-b/y.py", 3, "h", "under a-b")])]
    return kb(records)


def test_names_that_once_collided_each_get_a_page():
    pages = render.render_pages(colliding_kb())
    assert [p for p in pages if not p.startswith("errors/")] == [
        "generated/nav.json", "index.md", "reported.md",
        "subsystems/a-b.md", "subsystems/a~2db.md", "subsystems/index.md", "subsystems/index~.md",
        "types/index.md", "types/index~.md", "types/other-builtin.md",
    ]  # fmt: skip
    assert "title: \"Errors by subsystem\"" in pages["subsystems/index.md"] and "title: \"Errors by type\"" in pages["types/index.md"]
    for r in colliding_kb().records:
        assert f"../errors/{r.id}.md" in pages[f"subsystems/{render.subsystem_slug(r.subsystem)}.md"]
        assert f"(../subsystems/{render.subsystem_slug(r.subsystem)}.md)" in pages[f"errors/{r.id}.md"]


def test_two_pages_at_one_path_are_an_internal_error(monkeypatch):
    monkeypatch.setattr(render, "subsystem_slug", lambda name: "index" if name == "config" else name.replace("/", "-"))
    with pytest.raises(RuntimeError, match=r"the subsystems overview and subsystem 'config' both render to subsystems/index\.md"):
        render.render_pages(kb())
    monkeypatch.setattr(render, "subsystem_slug", lambda name: {"config": "evil", "evil": "Evil"}.get(name, "v1-worker"))  # apart only in case
    with pytest.raises(RuntimeError, match=r"subsystem 'config' and subsystem 'evil' both render to subsystems/Evil\.md"):
        render.render_pages(kb())


SENTENCES = [
    pytest.param("One. Two.", "One.", id="two"),
    pytest.param("Uses `vllm.config` here. Then `x`.", "Uses `vllm.config` here.", id="code-dots"),
    pytest.param("No full stop", "No full stop", id="none"),
    pytest.param("e.g. this one. Next", "e.g. this one.", id="abbreviation"),
    pytest.param("It fails. vLLM then stops.", "It fails.", id="lower-case-next"),
    pytest.param("`<img src=x onerror=alert(1)> a. b` c. d", "`<img src=x onerror=alert(1)> a. b` c.", id="no-cut-inside-code"),
    pytest.param("``a`. b`` c. d", "``a`. b`` c.", id="no-cut-inside-double-code"),
]


@pytest.mark.parametrize("text, expected", SENTENCES)
def test_first_sentence(text, expected):
    assert render.first_sentence(text) == expected


NOTES = [
    pytest.param("re-raises the exception caught by `except Exception`", "re\\-raises the exception caught by `except Exception`", id="reraise"),
    pytest.param("computed from `a`b` here", "computed from ``a`b`` here", id="backtick-inside"),
    pytest.param("no code *here*", "no code \\*here\\*", id="no-code"),
    pytest.param(None, "", id="none"),
]


@pytest.mark.parametrize("text, expected", NOTES)
def test_note(text, expected):
    assert render.note(text) == expected


PROSE = [
    pytest.param("Reads `LMCACHE_CONFIG_FILE` if set.", "Reads `LMCACHE_CONFIG_FILE` if set\\.", id="code"),
    pytest.param("RST ``double`` and *stars*", "RST `double` and \\*stars\\*", id="rst"),
    pytest.param("an odd ` tick <b>", "an odd \\` tick &lt;b&gt;", id="unpaired"),
]


@pytest.mark.parametrize("text, expected", PROSE)
def test_prose(text, expected):
    assert render.prose(text) == expected


def test_summaries_and_descriptions():
    assert render.summary(FULL) == "The requested `--max-model-len` is longer than the model supports."
    assert render.description(FULL) == "The requested --max-model-len is longer than the model supports."
    assert render.summary(MANY) == "An `assert` that fails in `Runner0.step` and 4 other places (v1/worker)."
    plain = replace(FULL, annotation=Annotation())
    assert render.summary(plain) == "A `VLLMValidationError` raised in `ModelConfig.verify` (config)."
    assert render.description(plain) == "A VLLMValidationError raised in ModelConfig.verify (config)."


def test_code_block_numbers_lines_as_in_the_file():
    block = render.code_block(FULL.sites[0])
    assert block.startswith('```python linenums="398" hl_lines="15-17"\n')
    lines = block.split("\n")[1:-1]
    assert "raise VLLMValidationError(" in lines[412 - 398] and lines[414 - 398].strip() == ")"


def test_permalink_and_report_url():
    assert render.permalink(FULL.sites[0], SNAP) == "https://github.com/vllm-project/vllm/blob/4ba787ec9/vllm/config/model.py#L412-L414"
    link = render.report_url(HOSTILE_RECORD, "owner/repo")
    assert link.startswith("https://github.com/owner/repo/issues/new?title=Error%20page%203333333333333333")
    assert re.fullmatch(r"[A-Za-z0-9%._~/:?=&-]+", link)  # nothing Markdown or HTML could read


# --- pages: goldens, sections, determinism -------------------------------------------------------------


def golden_files() -> dict[str, str]:
    """The two layers: the model the renderer was given, and every page it rendered."""
    files = {"model.json": json.dumps([record_to_data(r) for r in kb().records], indent=1, sort_keys=True, ensure_ascii=False) + "\n"}
    files.update({f"pages/{rel}": text for rel, text in render.render_pages(kb(), "owner/repo").items()})
    return files


def test_pages_match_goldens():
    files = golden_files()
    if UPDATE:
        shutil.rmtree(GOLDENS, ignore_errors=True)
        for rel, text in files.items():
            (GOLDENS / rel).parent.mkdir(parents=True, exist_ok=True)
            (GOLDENS / rel).write_text(text, encoding="utf-8")
    stored = {str(p.relative_to(GOLDENS)): p.read_text(encoding="utf-8") for p in sorted(GOLDENS.rglob("*")) if p.is_file()}
    assert sorted(stored) == sorted(files), "pages added or removed: regenerate with UPDATE_GOLDENS=1"
    for rel, text in files.items():
        assert stored[rel] == text, f"{rel} changed: review the diff, then regenerate with UPDATE_GOLDENS=1"


def test_internal_errors_point_to_vllm_instead_of_solutions():
    page = render.render_pages(kb())["errors/2222222222222222.md"]
    assert "## Report this to vLLM" in page and "## Solutions" not in page
    assert "(https://github.com/vllm-project/vllm/issues/new?title=%5BBug%5D%3A%20AssertionError" in page
    assert "## Report this to vLLM" not in render.render_pages(kb())["errors/1111111111111111.md"]


def test_render_is_deterministic_under_shuffled_input():
    expected = render.render_pages(kb())
    for seed in range(3):
        records = list(kb().records)
        random.Random(seed).shuffle(records)
        assert render.render_pages(kb(records)) == expected


def test_the_pages_there_are():
    pages = render.render_pages(kb())
    assert sorted(pages) == [
        "errors/1111111111111111.md", "errors/2222222222222222.md", "errors/3333333333333333.md",
        "generated/nav.json", "index.md", "reported.md",
        "subsystems/config.md", "subsystems/evil.md", "subsystems/index.md", "subsystems/v1-worker.md",
        "types/index.md", "types/other-builtin.md", "types/other-exceptions.md", "types/other-vllm.md",
    ]  # fmt: skip
    for rel, text in pages.items():
        if rel.endswith(".md"):
            assert text.startswith("---\n# Generated by vllm-errors from vllm-project/vllm 0.33.0 (upstream commit 4ba787ec9")
    nav = json.loads(pages["generated/nav.json"])
    assert "4ba787ec9" in nav["generated"]
    assert not any("errors/" in json.dumps(item) for item in nav["nav"])


def sections(page: str) -> list[str]:
    return re.findall(r"^##+ ([^{\n]*?)(?: \{.*)?$", page, flags=re.M)


def test_error_page_sections_in_order_and_absent_when_empty():
    pages = render.render_pages(kb())
    assert sections(pages["errors/1111111111111111.md"]) == [
        "Error message", "What it means", "Terms used here", "When it happens", "Common situations", "Solutions", "Example fix",
        "Where it is raised", "`vllm/config/model.py:412`", "Related errors",
    ]  # fmt: skip
    assert sections(pages["errors/2222222222222222.md"]) == [
        "Error message", "Report this to vLLM", "Where it is raised", "`vllm/v1/worker/runner_0.py:5`", "`vllm/v1/worker/runner_1.py:15`",
        "`vllm/v1/worker/runner_2.py:25`", "Other places", "Related errors",
    ]  # fmt: skip
    full = pages["errors/1111111111111111.md"]
    for expected in ("Curated by hand.", "Derived from the code.", "AI-assisted", "May be out of date", "User error",
                     'title="Before"', "- `{self.max_model_len}`: the value of `self.max_model_len`", "VLLMClientError"):  # fmt: skip
        assert expected in full
    assert "ffffffffffffffff" not in full
    many = pages["errors/2222222222222222.md"]
    assert many.count('??? note "') == 2 and "No fixed message: the message is computed at run time from `msg`." in many


def test_hook_appends_the_generated_nav(tmp_path):
    from vllm_errors import mkdocs_hooks

    class Config:
        docs_dir = str(tmp_path)
        nav = [{"Home": "index.md"}]

    assert mkdocs_hooks.on_config(Config).nav == [{"Home": "index.md"}]  # nothing rendered yet: left alone
    (tmp_path / "generated").mkdir()
    (tmp_path / "generated" / "nav.json").write_text(render.render_pages(kb())["generated/nav.json"])
    nav = mkdocs_hooks.on_config(Config).nav
    assert nav[0] == {"Home": "index.md"} and [next(iter(item)) for item in nav[1:]] == ["Most reported", "Errors by subsystem", "Errors by type"]


# --- a real mkdocs build of the three pages ------------------------------------------------------------


def copy_committed(folder: Path, dest: Path) -> None:
    """The files git tracks in `folder`, copied to `dest`: never what a build, or anything else, left there.

    (Outside a git checkout, the whole folder.)
    """
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--", "."], cwd=folder, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(folder, dest, dirs_exist_ok=True)
        return
    for rel in filter(None, listed.decode("utf-8").split("\0")):
        if (folder / rel).is_file():  # tracked, but maybe deleted in the working tree
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(folder / rel, dest / rel)


# Generated pages that builds of older versions wrote into site/ (and `make site` wrote there by the
# thousand): their links point at pages this build does not have.
STRAYS = ("releases/v0.0.0-stray.md", "errors/ffffffffffff0000.md")
STRAY_TEXT = "---\ntitle: stray\n---\n\n# Stray\n\n[gone](../errors/0000000000000000.md) [also gone](v9.9.9.md)\n"


@pytest.fixture(scope="module")
def strays_in_site():
    """Stray generated pages where `make site` put them, in the working tree's site/, for the module's builds."""
    made = []
    for rel in STRAYS:
        path = ROOT / "site" / rel
        if not path.exists():
            made += [d for d in reversed(path.parents) if d.is_relative_to(ROOT / "site") and not d.exists()]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(STRAY_TEXT, encoding="utf-8")
            made.append(path)
    yield
    for path in reversed(made):
        if path.is_dir():
            path.rmdir()
        else:
            path.unlink()


@pytest.fixture(scope="module")
def built(tmp_path_factory, strays_in_site):
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    tmp = tmp_path_factory.mktemp("site")
    docs, out = tmp / "docs", tmp / "out"
    copy_committed(ROOT / "site", docs)
    for rel, text in render.render_pages(kb()).items():
        (docs / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs / rel).write_text(text, encoding="utf-8")
    for r in kb().records:  # the JSON the footer links to (written by the API stage in a real build)
        (docs / "api" / "errors").mkdir(parents=True, exist_ok=True)
        (docs / "api" / "errors" / f"{r.id}.json").write_text(json.dumps({"id": r.id}))
    warnings: list[str] = []

    class Collect(__import__("logging").Handler):
        def emit(self, rec):
            warnings.append(rec.getMessage())

    handler = Collect(level=30)
    log = __import__("logging").getLogger("mkdocs")
    log.addHandler(handler)
    try:
        build(load_config(config_file=str(ROOT / "mkdocs.yml"), docs_dir=str(docs), site_dir=str(out)))
    finally:
        log.removeHandler(handler)
    index_site(out)  # as the pipeline does after mkdocs
    return out, warnings


def test_build_has_no_warnings(built):
    assert all((ROOT / "site" / rel).is_file() for rel in STRAYS)  # built with stray generated pages in site/
    assert built[1] == []


class Elements(HTMLParser):
    """Every element of a page as the browser would see it: tag, attributes, and the text of scripts."""

    def __init__(self, page: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[str] = []
        self._in_script = False
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag):
        self._in_script = False

    def handle_data(self, data):
        if self._in_script:
            self.scripts.append(data)


def test_hostile_text_is_inert_in_built_html(built):
    out, _ = built
    pages = {p: p.read_text(encoding="utf-8") for p in out.rglob("*.html")}
    assert len(pages) >= 13
    for path, page in pages.items():
        seen = Elements(page)
        assert not [t for t, _ in seen.tags if t in ("img", "i", "b")], path
        assert not [a for _, attrs in seen.tags for a in attrs if a.startswith("on")], path
        assert not [v for _, attrs in seen.tags for v in attrs.values() if v and v.strip().lower().startswith("javascript:")], path
        assert not [s for s in seen.scripts if "alert" in s], path
        assert not [attrs for t, attrs in seen.tags if t == "script" and "src" not in attrs and "alert" in str(attrs)], path
    page = pages[out / "errors" / "3333333333333333.html"]
    h1 = re.search(r"<h1[^>]*>(.*?)<a class=\"headerlink\"", page, re.S).group(1)
    assert h1 == html.escape("make_error(\"<script>alert(2)</script>\"): " + render.fold(HOSTILE), quote=False)
    assert "<title>make_error(&quot;&lt;script&gt;alert(2)&lt;/script&gt;&quot;): # heading &lt;script&gt;" in page
    for literal in ("[x](javascript:alert(1))", "*emphasis*", "{{ x }}", "{% raw %}", "``double``", "a | b"):
        assert html.escape(literal, quote=False) in h1
    assert "<em>" not in h1 and "<hr" not in page.split('<div class="language-text')[0].split("<article")[1]
    # the message block keeps the lines, the code block keeps every line under its own number
    assert "<span class=\"hll\">" in page and 'href="#__codelineno-' in page


def test_hostile_rows_keep_their_cells(built):
    out, _ = built
    page = (out / "types" / "other-exceptions.html").read_text(encoding="utf-8")
    rows = re.findall(r"<tr>(.*?)</tr>", page, re.S)
    assert len(rows) == 2 and [r.count("<td") for r in rows[1:]] == [3]
    assert "<code>vllm/<wbr>evil/<wbr>a_b*c`d|e.py:7</code>" in rows[1]


def test_error_pages_link_as_siblings_and_stay_out_of_the_nav(built):
    out, _ = built
    page = (out / "errors" / "1111111111111111.html").read_text(encoding="utf-8")
    assert 'href="2222222222222222.html"' in page and 'href="3333333333333333.html"' in page
    assert 'href="../api/errors/1111111111111111.json"' in page
    assert 'data-search-exclude data-pagefind-ignore="all" id="where"' in page
    home = (out / "index.html").read_text(encoding="utf-8")
    assert 'id="lookup"' in home and "errors/1111111111111111.html" not in home
    assert 'href="v1-worker.html"' in (out / "subsystems" / "index.html").read_text(encoding="utf-8")
    # the nav, from generated/nav.json through the hook: the config page links its sibling only there
    assert 'href="v1-worker.html"' in (out / "subsystems" / "config.html").read_text(encoding="utf-8")


def test_code_and_related_errors_stay_out_of_search(built):
    out, _ = built
    pages = indexed_pages(out)
    text = json.dumps(pages)
    assert CODE_ONLY not in text and "runner_3" not in text and "Related errors" not in text and "¶" not in text
    first, second = pages["errors/1111111111111111.html"], pages["errors/2222222222222222.html"]
    assert "What it means" in first and "max_model_len" in first
    # derived text stays out of search, written text (curated, AI-assisted) is found
    assert "When it happens" not in first and "Solutions" in first
    assert "4 other places" in second and "Where it is raised" not in second


def test_a_wrapper_page_says_where_the_real_error_is():
    wrapper = replace(MANY, wrapper="points")
    pages = render.render_pages(kb((FULL, wrapper, HOSTILE_RECORD)), "vllm-errors/vllm-errors")
    assert "The real error is earlier in the log" in pages[f"errors/{wrapper.id}.md"]
    assert "The real error is earlier in the log" not in pages[f"errors/{FULL.id}.md"]


def test_a_reraise_is_badged_as_passed_on_not_as_control_flow():
    passed = record("4444444444444444", "Exception", None,
                    [site("vllm/v1/engine/core.py", 20, "Core.step", None, exception="raise", qualname="Exception", how="reraise",
                          guard=[Condition("except", "Exception", True, 18)])],
                    annotation=Annotation(kind="control", sources={"kind": "derived"}))
    ended = replace(passed, id="5555555555555555", sites=(replace(passed.sites[0], exception=replace(passed.sites[0].exception, how="name")),))
    pages = render.render_pages(kb((FULL, passed, ended)))
    assert "Passed on</span> The exception caught here goes on unchanged" in pages["errors/4444444444444444.md"]
    assert "Control flow" not in pages["errors/4444444444444444.md"]
    assert "Control flow</span> Not a failure in itself" in pages["errors/5555555555555555.md"]
