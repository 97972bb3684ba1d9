"""The LLM annotator against a real local chat-completions server: the request, the cache, every failure, hostile text."""

from __future__ import annotations

import json
import socket
import textwrap
import threading
from dataclasses import replace
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import markdown
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from vllm_errors.annotate import derived_annotator
from vllm_errors.catalog import build_catalog
from vllm_errors.llm import PROMPT_VERSION, LlmAnnotator, LlmConfig, cache_key, inert_markdown
from vllm_errors.model import Annotation, Code, ExampleFix, Snapshot
from vllm_errors.scanner import scan_module

SNAP = Snapshot(repository="vllm-project/vllm", ref="v1", commit="c" * 40, date="2025-01-01T00:00:00+00:00", upstream_commit="c" * 40)

CODE = '''
def check_cache(kv_cache_dtype, block_size):
    """Check that the KV cache settings fit together."""
    use_fp8 = kv_cache_dtype.startswith("fp8")
    if use_fp8 and block_size > 16:
        raise ValueError(f"fp8 KV cache needs a block size of at most 16, got {block_size}")


def load(path):
    if not path:
        raise FileNotFoundError("no model path given")


def shard(world_size):
    assert world_size % 2 == 0, "world size must be even"
'''

VALID = {
    "meaning": "The `fp8` KV cache only works with small blocks.",
    "triggers": ["`--kv-cache-dtype` starts with `fp8` and `--block-size` is above 16."],
    "situations": ["Serving on Hopper with an fp8 cache and a large block size."],
    "solutions": ["Pass `--block-size 16`.", "Use `--kv-cache-dtype auto`."],
    "example_fix": {"before": "vllm serve m --block-size 32", "after": "vllm serve m --block-size 16", "language": "shell"},
}
HOSTILE = {
    **VALID,
    "meaning": "<script>alert(1)</script> See [the docs](javascript:alert(1)) and ![x](http://evil.example/t.png).",
    "solutions": ["<img src=x onerror=alert(1)>", "[ok](https://docs.vllm.ai/)"],
}


def catalog_of(code: str):
    return build_catalog(SNAP, [scan_module("vllm/config/cache.py", textwrap.dedent(code).encode())], 1)


CATALOG = catalog_of(CODE)
ERRORS = {e.template: e for e in CATALOG.errors}
FP8 = ERRORS["fp8 KV cache needs a block size of at most 16, got {block_size}"]
DERIVED = derived_annotator(CATALOG)


# --- a chat-completions server ---------------------------------------------------------------------


def chat(content: str) -> dict:
    return {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]}


REPLIES = {
    "valid": lambda: chat(json.dumps(VALID)),
    "fenced": lambda: chat(f"```json\n{json.dumps(VALID, indent=2)}\n```"),
    "hostile": lambda: chat(json.dumps(HOSTILE)),
    "invalid_json": lambda: chat('{"meaning": "unfinished'),
    "extra_key": lambda: chat(json.dumps({**VALID, "confidence": 0.9})),
    "missing_key": lambda: chat(json.dumps({k: v for k, v in VALID.items() if k != "situations"})),
    "too_long": lambda: chat(json.dumps({**VALID, "meaning": "x" * 1501})),
    "too_many": lambda: chat(json.dumps({**VALID, "solutions": ["do it"] * 7})),
    "wrong_type": lambda: chat(json.dumps({**VALID, "triggers": "one string"})),
    "bad_language": lambda: chat(json.dumps({**VALID, "example_fix": {**VALID["example_fix"], "language": 'sh" onload="x'}})),
    "not_chat": lambda: {"error": "no"},
}


class Server(ThreadingHTTPServer):
    daemon_threads = False  # server_close joins the handler threads: no thread outlives a test

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.mode = "valid"
        self.requests: list[dict] = []
        self.release = threading.Event()
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"


class Handler(BaseHTTPRequestHandler):
    server: Server

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
        if self.server.mode == "slow":
            self.server.release.wait(10)
            return
        if self.server.mode == "500":
            self.send_error(500, "boom")
            return
        data = json.dumps(REPLIES[self.server.mode]()).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
    for name in ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server():
    srv = Server()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    yield srv
    srv.release.set()
    srv.shutdown()
    srv.server_close()
    thread.join()


def annotator(server: Server, tmp_path, **changes) -> LlmAnnotator:
    config = LlmConfig(url=server.url, model="test-model", cache_dir=tmp_path, timeout=2.0)
    return LlmAnnotator(replace(config, **changes), DERIVED)


def cache_files(tmp_path):
    return sorted((tmp_path / "llm").glob("*")) if (tmp_path / "llm").is_dir() else []


# --- the request -------------------------------------------------------------------------------------


def test_the_request_carries_the_code_the_guard_the_derived_facts_and_the_model(server, tmp_path):
    annotator(server, tmp_path, api_key="sekret")(FP8)
    (request,) = server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sekret"
    body = request["body"]
    assert body["model"] == "test-model"
    assert body["response_format"] == {"type": "json_object"}
    assert body["temperature"] == 0
    system, user = body["messages"]
    assert (system["role"], user["role"]) == ("system", "user")
    assert all(key in system["content"] for key in ('"meaning"', '"triggers"', '"situations"', '"solutions"', '"example_fix"'))
    prompt = user["content"]
    derived = DERIVED(FP8)
    assert derived.triggers
    for fact in [
        "Exception: ValueError",
        "Message template: fp8 KV cache needs a block size of at most 16, got {block_size}",
        "vllm/config/cache.py:6, in check_cache",
        "Function docstring: Check that the KV cache settings fit together.",
        "- if `use_fp8 and block_size > 16` holds=True",
        '`use_fp8 = kv_cache_dtype.startswith("fp8")`',
        '        raise ValueError(f"fp8 KV cache needs a block size of at most 16, got {block_size}")',
        *derived.triggers,
        *derived.solutions,
    ]:
        assert fact in prompt


def test_no_key_no_authorization_header(server, tmp_path):
    annotator(server, tmp_path)(FP8)
    assert "Authorization" not in server.requests[0]["headers"]


def test_long_code_is_trimmed_around_the_raise(server, tmp_path):
    site = FP8.sites[0]
    lines = [f"    x{i} = {i}" for i in range(200)]
    lines[120] = "    raise ValueError('deep inside')"
    long = replace(site, line=site.code.first_line + 120, code=Code(first_line=site.code.first_line, text="\n".join(lines)))
    annotator(server, tmp_path)(replace(FP8, sites=(long,)))
    prompt = server.requests[0]["body"]["messages"][1]["content"]
    shown = prompt.split("```python\n", 1)[1].split("\n```", 1)[0].split("\n")
    assert shown == lines[80:140]
    assert f"Code, lines {site.code.first_line + 80}-{site.code.first_line + 139}:" in prompt


# --- replies -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["valid", "fenced"])
def test_a_valid_reply_is_an_annotation_written_by_ai(server, tmp_path, mode):
    server.mode = mode
    llm = annotator(server, tmp_path)
    annotation = llm(FP8)
    assert annotation == Annotation(
        meaning=VALID["meaning"],
        triggers=tuple(VALID["triggers"]),
        situations=tuple(VALID["situations"]),
        solutions=tuple(VALID["solutions"]),
        example_fix=ExampleFix(**VALID["example_fix"]),
        sources={"meaning": "ai", "triggers": "ai", "situations": "ai", "solutions": "ai", "example_fix": "ai"},
    )
    assert annotation.kind == "unknown"  # the derived kind stands
    assert llm.failures == []


FAILURES = [
    ("invalid_json", "not JSON"),
    ("extra_key", "confidence: Extra inputs are not permitted"),
    ("missing_key", "situations: Field required"),
    ("too_long", "meaning: String should have at most 1500 characters"),
    ("too_many", "solutions: List should have at most 6 items"),
    ("wrong_type", "triggers: Input should be a valid list"),
    ("bad_language", "example_fix.language: String should match pattern"),
    ("not_chat", "not a chat-completions response"),
    ("500", "HTTP 500"),
    ("slow", "timed out after 0.2 s"),
]


@pytest.mark.parametrize(("mode", "reason"), FAILURES, ids=[mode for mode, _ in FAILURES])
def test_every_failure_leaves_the_derived_annotation_and_is_reported_once(server, tmp_path, mode, reason):
    server.mode = mode
    llm = annotator(server, tmp_path, timeout=0.2)
    assert llm(FP8) == Annotation()
    assert llm(FP8) == Annotation()  # asked once per run, reported once
    assert len(server.requests) == 1
    ((error_id, said),) = llm.failures
    assert error_id == FP8.id and reason in said and "\n" not in said
    assert cache_files(tmp_path) == []  # failures are not cached


def test_an_unreachable_server_is_a_failure(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    llm = LlmAnnotator(LlmConfig(url=f"http://127.0.0.1:{port}/v1", model="m", cache_dir=tmp_path, timeout=1), DERIVED)
    assert llm(FP8) == Annotation()
    ((error_id, said),) = llm.failures
    assert said.startswith("cannot reach the server")


def test_a_failing_derived_annotator_is_a_failure_too(server, tmp_path):
    def broken(error):
        raise RuntimeError("derived broke")

    llm = LlmAnnotator(LlmConfig(url=server.url, model="m", cache_dir=tmp_path), broken)
    assert llm(FP8) == Annotation()
    assert llm.failures == [(FP8.id, "RuntimeError: derived broke")]


# --- the cache ---------------------------------------------------------------------------------------


def test_a_second_call_reads_the_cache_and_gives_the_same_annotation(server, tmp_path):
    first = annotator(server, tmp_path)(FP8)
    server.mode = "500"  # the server is not asked again
    again = annotator(server, tmp_path)(FP8)
    assert len(server.requests) == 1 and again == first
    (path,) = cache_files(tmp_path)
    assert path.name == f"{cache_key(FP8, 'test-model')}.json"
    stored = json.loads(path.read_text())
    assert (stored["error"], stored["model"], stored["prompt_version"]) == (FP8.id, "test-model", PROMPT_VERSION)
    assert path.read_text() == json.dumps(stored, sort_keys=True, ensure_ascii=False, indent=1) + "\n"


def test_a_broken_cache_file_is_asked_for_again(server, tmp_path):
    llm = annotator(server, tmp_path)
    llm(FP8)
    (path,) = cache_files(tmp_path)
    path.write_text("{half")
    assert annotator(server, tmp_path)(FP8).meaning == VALID["meaning"]
    assert len(server.requests) == 2 and json.loads(path.read_text())["reply"] == VALID


def test_the_model_the_code_and_the_template_are_in_the_key(server, tmp_path):
    key = cache_key(FP8, "test-model")
    assert cache_key(FP8, "other-model") != key
    edited = catalog_of(CODE.replace("block_size > 16", "block_size > 32"))
    assert [e.id for e in edited.errors] == [e.id for e in CATALOG.errors]  # same error, other code
    moved = {e.id: e for e in edited.errors}[FP8.id]
    assert cache_key(moved, "test-model") != key
    assert cache_key(replace(FP8, template="other"), "test-model") != key

    annotator(server, tmp_path)(FP8)
    annotator(server, tmp_path, model="other-model")(FP8)
    annotator(server, tmp_path)(moved)
    assert len(server.requests) == 3 and len(cache_files(tmp_path)) == 3


def test_prefetch_asks_for_what_is_not_cached_concurrently(server, tmp_path):
    errors = list(CATALOG.errors)
    annotator(server, tmp_path)(errors[0])
    llm = annotator(server, tmp_path, workers=3)
    llm.prefetch(errors, progress=False)
    assert len(server.requests) == len(errors) == 3
    assert sorted(r["body"]["messages"][1]["content"].split("\n")[1] for r in server.requests) == sorted(
        f"Message template: {e.template}" for e in errors
    )
    assert all(llm(e).sources.get("meaning") == "ai" for e in errors)
    assert len(server.requests) == 3 and llm.failures == []
    assert [p.suffix for p in cache_files(tmp_path)] == [".json"] * 3  # no temporary files left


def test_prefetch_reports_failures_and_does_not_ask_again(server, tmp_path):
    server.mode = "invalid_json"
    llm = annotator(server, tmp_path, workers=2)
    llm.prefetch(CATALOG.errors, progress=False)
    assert sorted(error_id for error_id, _ in llm.failures) == sorted(e.id for e in CATALOG.errors)
    assert all(llm(e) == Annotation() for e in CATALOG.errors)
    assert len(server.requests) == 3 and len(llm.failures) == 3


# --- untrusted text ----------------------------------------------------------------------------------


def test_hostile_text_from_the_server_is_neutralised(server, tmp_path):
    server.mode = "hostile"
    annotation = annotator(server, tmp_path)(FP8)
    assert annotation.meaning == (
        "&lt;script&gt;alert(1)&lt;/script&gt; See the docs and x."
    )
    assert annotation.solutions == ("&lt;img src=x onerror=alert(1)&gt;", "[ok](https://docs.vllm.ai/)")
    assert annotation.sources["meaning"] == "ai"


INERT = [
    ("plain words", "plain words"),
    ("line\n\n  breaks", "line breaks"),
    ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
    ("a & b > c", "a &amp; b &gt; c"),
    ("&lt;b&gt;", "&amp;lt;b&amp;gt;"),
    ("[x](javascript:alert(1))", "x"),
    ("[x]( JavaScript:alert(1) )", "x"),
    ("[x](http://example.com)", "x"),
    ("[x](data:text/html,hi)", "x"),
    ("[docs](https://docs.vllm.ai/en/latest/)", "[docs](https://docs.vllm.ai/en/latest/)"),
    ('[docs](<https://docs.vllm.ai/> "title")', "[docs](https://docs.vllm.ai/)"),
    ("[](https://docs.vllm.ai/)", "[https://docs.vllm.ai/](https://docs.vllm.ai/)"),
    ("![pixel](https://evil.example/p.png)", "pixel"),
    ("<https://evil.example>", "&lt;https://evil.example&gt;"),
    ("[ref]: javascript:alert(1)", "\\[ref\\]: javascript:alert(1)"),
    ("[x][ref]", "\\[x\\]\\[ref\\]"),
    ("text {: onclick=alert(1) }", "text \\{: onclick=alert(1) \\}"),
    ("set `--max-model-len <n>` & go", "set `--max-model-len <n>` &amp; go"),
    ("``a`b``", "``a`b``"),
    ("`[x](javascript:y)`", "`[x](javascript:y)`"),
    ("unclosed `tick <b>", "unclosed \\`tick &lt;b&gt;"),
    ("back\\slash", "back\\\\slash"),
    ("`#!js alert(1)`", "` #!js alert(1) `"),
    ("# heading", "&#35; heading"),
    ("!!! danger", "&#33;!! danger"),
    ("??? note", "&#63;?? note"),
    ("- item", "&#45; item"),
    ("1. first", "&#49;. first"),
    ("3 GPUs", "3 GPUs"),
    ("```a``b```", "&#8203;```a``b```"),
    ("* item", "&#42; item"),
    ("***", "&#42;**"),
    ("_ _ _", "&#95; _ _"),
    ("**bold** and _em_", "**bold** and _em_"),
]


@pytest.mark.parametrize(("text", "expected"), INERT, ids=[t for t, _ in INERT])
def test_inert_markdown(text, expected):
    assert inert_markdown(text) == expected


EXTENSIONS = ["admonition", "attr_list", "md_in_html", "tables", "toc", "pymdownx.details", "pymdownx.highlight", "pymdownx.inlinehilite", "pymdownx.superfences"]
ALLOWED = {"p", "code", "a", "em", "strong", "ul", "li", "ol"}


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, list]] = []

    def handle_starttag(self, tag, attrs):
        self.found.append((tag, attrs))


TOKENS = list("`[]()!<>&\\{}#*_:-=|~?. \n1") + ["javascript:", "https://a.example/", "http://x", "script", "img", "onclick=", "a", '"']


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(TOKENS), max_size=40).map("".join))
@example("<script>x</script>")
@example("[x](https://a.example/){: onclick=alert(1) }")
@example("```\n<b>\n```")
def test_inert_text_renders_only_as_text_code_and_https_links(text):
    inert = inert_markdown(text)
    for page in (inert, f"- {inert}", f"1. {inert}"):
        parser = Tags()
        parser.feed(markdown.markdown(page, extensions=EXTENSIONS))
        for tag, attrs in parser.found:
            assert tag in ALLOWED, (text, page)
            if tag == "a":
                assert [name for name, _ in attrs] == ["href"] and attrs[0][1].startswith("https://"), (text, page)
            else:
                assert attrs == [], (text, page)
