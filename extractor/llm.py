"""The optional LLM annotator: an OpenAI-compatible server explains each error from its code, cached on disk, never trusted."""

from __future__ import annotations

import hashlib
import html
import http.client
import json
import os
import re
import tempfile
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Callable, Sequence

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from tqdm import tqdm

from .model import Annotation, ErrorEntry, ExampleFix, RaiseSite

# Bump when the prompt or the reading of replies changes: it is part of every cache key.
PROMPT_VERSION = "1"
MAX_SITES = 3  # sites shown to the model; the rest repeat them
MAX_CODE_LINES = 60
MAX_REPLY_BYTES = 1_000_000


@dataclass(frozen=True)
class LlmConfig:
    url: str  # base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1 (a vLLM server works)
    model: str  # the model name the server knows
    cache_dir: Path  # results are cached under cache_dir/llm/
    api_key: str | None = None  # sent as a Bearer token when given
    timeout: float = 60.0  # seconds, per socket operation of one request
    workers: int = 4  # concurrent requests in `prefetch`


# --- the reply: what the model must answer, checked strictly ----------------------------------

_Item = Annotated[str, StringConstraints(max_length=400)]


class _Fix(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    before: str = Field(max_length=2000)
    after: str = Field(max_length=2000)
    language: str = Field(max_length=20, pattern=r"^[A-Za-z0-9_+-]+$")


class Reply(BaseModel):
    """The JSON object the model answers with; anything else is a failure."""

    model_config = ConfigDict(extra="forbid", strict=True)
    meaning: str = Field(max_length=1500)
    triggers: list[_Item] = Field(max_length=6)
    situations: list[_Item] = Field(max_length=6)
    solutions: list[_Item] = Field(max_length=6)
    example_fix: _Fix | None


class _Failure(Exception):
    """One error's request or reply went wrong; the message is the one-line reason."""


# --- making untrusted text inert Markdown -------------------------------------------------------

_BACKTICKS = re.compile(r"`+")
_LINK = re.compile(r"""(!?)\[([^\[\]]*)\]\(\s*<?((?:[^\s()<>]|\([^\s()<>]*\))*)>?(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)""")
_HTTPS = re.compile(r"https://[A-Za-z0-9\-._~:/?#@!$&'*+,;=%]+")
_PROSE_SPECIAL = re.compile(r"([\\`\[\]{}])")  # code spans, links, references, attribute lists
# What opens a block at the start of a line: heading, admonition, details, list item, rule.
_BLOCK_START = re.compile(r"[#!?=|:~]|[*+\-](?=\s)|[*\-_][\s*\-_]*$|[0-9]+[.)]")


def inert_markdown(text: str) -> str:
    """Untrusted text as one line of Markdown that can only render as text, code spans and https links.

    Code spans are found as Markdown finds them and written back with a fence of their own;
    everything else is escaped, so the only markup left is what this function wrote. Raw HTML
    becomes entities, links survive only to https, images become their alt text (a remote
    image reports every reader to its host), and a first character that could open a block
    (heading, list, admonition) becomes an entity.
    """
    out = []
    for is_code, part in _code_split(" ".join(text.split())):
        out.append(_span(part) if is_code else _prose(part))
    result = "".join(out)
    if _BLOCK_START.match(result):
        result = f"&#{ord(result[0])};{result[1:]}"
    elif result.startswith("```"):
        result = "&#8203;" + result  # a long code-span fence at the start of a line would open a code block
    return result


def _code_split(text: str) -> list[tuple[bool, str]]:
    """(is code, text) parts: a run of n backticks opens a span that the next run of exactly n closes."""
    parts: list[tuple[bool, str]] = []
    runs = list(_BACKTICKS.finditer(text))
    start = i = 0
    while i < len(runs):
        opening = runs[i]
        close = next((j for j in range(i + 1, len(runs)) if len(runs[j].group()) == len(opening.group())), None)
        if close is None:
            i += 1
            continue
        parts.append((False, text[start : opening.start()]))
        parts.append((True, text[opening.end() : runs[close].start()]))
        start = runs[close].end()
        i = close + 1
    parts.append((False, text[start:]))
    return [(is_code, part) for is_code, part in parts if part or is_code]


def _span(text: str) -> str:
    """A code span of `text`, its fence one backtick longer than any run inside (as in render.code)."""
    text = text.strip() or " "
    longest = max((len(run) for run in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith(("`", "#!", ":::")) or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _prose(text: str) -> str:
    out, start = [], 0
    for m in _LINK.finditer(text):
        out.append(_escape(text[start : m.start()]))
        image, label, target = m.groups()
        if not image and _HTTPS.fullmatch(target):
            out.append(f"[{_escape(label) or target}]({target})")
        else:
            out.append(_escape(label))
        start = m.end()
    out.append(_escape(text[start:]))
    return "".join(out)


def _escape(text: str) -> str:
    return html.escape(_PROSE_SPECIAL.sub(r"\\\1", text), quote=False)


# --- the prompt ----------------------------------------------------------------------------------

SYSTEM_PROMPT = """\
You explain errors raised by vLLM, the LLM inference and serving engine, to the people who hit \
them: users of `vllm serve` and of vLLM's Python API. You are given one error: its exception type, \
its message, where the code raises it (the conditions that lead there, where their values come \
from, and the surrounding code) and facts a program derived from that code.

Answer with one JSON object and nothing else, with exactly these keys:
- "meaning": a short paragraph (at most 1500 characters): what the error means, in plain words.
- "triggers": up to 6 strings: the conditions under which the error is raised, in words.
- "situations": up to 6 strings: common situations that lead there (a model, hardware, flag or \
input that users typically have when they see it).
- "solutions": up to 6 strings, most specific first: what to do so the error goes away.
- "example_fix": null, or {"before": "...", "after": "...", "language": "shell"}: a command line \
or code before and after a fix, only when the code shows one clearly. "language" names the \
highlighting: "shell", "python", "yaml", ...

Rules: base every statement on the code shown; name only flags, settings and environment \
variables that appear in the code or in the derived facts; write flags, settings, code and \
values in backticks; use no links, no HTML and no headings; each list item is at most 400 \
characters. When the error guards an assumption inside vLLM rather than reporting a mistake \
in the user's setup, say so and suggest reporting it as a bug."""


def build_messages(error: ErrorEntry, derived: Annotation) -> list[dict[str, str]]:
    """The system and user messages for one error."""
    sites = error.sites[:MAX_SITES]
    lines = [
        f"Exception: {error.exception}",
        f"Message template: {error.template if error.template is not None else '(none: the message is built at run time)'}",
        f"Statement: {error.kind}",
        f"Raised at {len(error.sites)} place(s); showing {len(sites)}.",
    ]
    for n, site in enumerate(sites, 1):
        lines += ["", *_site_lines(n, site)]
    lines += ["", f"Derived facts (worked out from the code by a program; kind: {derived.kind}):"]
    lines += [f"- trigger: {t}" for t in derived.triggers]
    lines += [f"- solution: {s}" for s in derived.solutions]
    if derived.example_fix:
        fix = derived.example_fix
        lines += [f"- example fix ({fix.language}): before: {fix.before} / after: {fix.after}"]
    if not (derived.triggers or derived.solutions or derived.example_fix):
        lines.append("- none")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n".join(lines)}]


def _site_lines(n: int, site: RaiseSite) -> list[str]:
    lines = [f"Site {n}: {site.path}:{site.line}, in {site.function}"]
    if site.function_doc:
        lines.append(f"Function docstring: {site.function_doc}")
    if site.guard:
        lines.append("Guard conditions, outermost first (`holds` false means the raise needs the condition to be false):")
        lines += [f"- {cond.kind} `{cond.code}` holds={cond.holds}" for cond in site.guard]
    if site.assignments:
        lines.append("Assignments the guard reads:")
        lines += [f"- line {a.line}: `{a.code}`" for a in site.assignments]
    first, text = _excerpt(site)
    last = first + text.count("\n")
    fence = "`" * max(3, max((len(r) for r in _BACKTICKS.findall(text)), default=0) + 1)
    lines += [f"Code, lines {first}-{last}:", f"{fence}python", text, fence]
    return lines


def _excerpt(site: RaiseSite) -> tuple[int, str]:
    """At most MAX_CODE_LINES of the site's code, more of it above the raise (where the guards are) than below."""
    code_lines = site.code.text.rstrip("\n").split("\n")
    if len(code_lines) <= MAX_CODE_LINES:
        return site.code.first_line, "\n".join(code_lines)
    at = site.line - site.code.first_line
    start = min(max(at - MAX_CODE_LINES * 2 // 3, 0), len(code_lines) - MAX_CODE_LINES)
    return site.code.first_line + start, "\n".join(code_lines[start : start + MAX_CODE_LINES])


def cache_key(error: ErrorEntry, model: str) -> str:
    """Changes with the error, the code the prompt shows, the template, the prompt's version and the model."""
    shown = [site.code.text for site in error.sites[:MAX_SITES]]
    code_hash = hashlib.sha256("\x1f".join([*shown, error.template or ""]).encode()).hexdigest()
    return hashlib.sha256(f"{error.id}|{code_hash}|{PROMPT_VERSION}|{model}".encode()).hexdigest()


def to_annotation(reply: Reply) -> Annotation:
    """The reply as Markdown that renders inert, each filled field marked as AI-written."""
    meaning = inert_markdown(reply.meaning) or None
    lists = {name: tuple(t for t in map(inert_markdown, getattr(reply, name)) if t) for name in ("triggers", "situations", "solutions")}
    fix = None
    if reply.example_fix and reply.example_fix.before.strip() and reply.example_fix.after.strip():
        f = reply.example_fix
        fix = ExampleFix(before=_block(f.before), after=_block(f.after), language=f.language.lower())
    values = {"meaning": meaning, **lists, "example_fix": fix}
    return Annotation(**values, sources={name: "ai" for name, value in values.items() if value})


def _block(text: str) -> str:
    """Code for a fenced block (the renderer fences it): normalised newlines, no trailing blank lines."""
    return "\n".join(line.rstrip() for line in text.replace("\r\n", "\n").replace("\r", "\n").strip("\n").split("\n"))


# --- the annotator -------------------------------------------------------------------------------


class LlmAnnotator:
    """`ErrorEntry -> Annotation` through an LLM; an empty Annotation (so earlier annotators stand) on any failure."""

    def __init__(self, config: LlmConfig, derived: Callable[[ErrorEntry], Annotation]) -> None:
        self.config = config
        self.derived = derived
        self.directory = config.cache_dir / "llm"
        self.failures: list[tuple[str, str]] = []  # (error id, one-line reason), in the order they happened
        self._failed: set[str] = set()  # cache keys that failed in this run: asked once, reported once
        self._lock = threading.Lock()

    def __call__(self, error: ErrorEntry) -> Annotation:
        reply = self._reply(error)
        return to_annotation(reply) if reply is not None else Annotation()

    def prefetch(self, errors: Sequence[ErrorEntry], progress: bool | None = None) -> None:
        """Ask for every error not yet cached, `workers` at a time; failures go to `failures`."""
        todo = [e for e in errors if not self._path(e).is_file()]
        bar = tqdm(total=len(todo), unit="error", desc="annotating with an LLM", disable=None if progress is None else not progress)
        with bar, ThreadPoolExecutor(max_workers=max(1, self.config.workers)) as pool:
            for future in as_completed([pool.submit(self._reply, e) for e in todo]):
                future.result()
                bar.update()

    def _path(self, error: ErrorEntry) -> Path:
        return self.directory / f"{cache_key(error, self.config.model)}.json"

    def _reply(self, error: ErrorEntry) -> Reply | None:
        """The cached reply, else the server's (then cached); None after recording why not. Never raises."""
        key = cache_key(error, self.config.model)
        with self._lock:
            if key in self._failed:
                return None
        path = self.directory / f"{key}.json"
        try:
            cached = _read_cache(path)
            if cached is not None:
                return cached
            reply = self._ask(error)
            _write_cache(path, error, self.config.model, reply)
            return reply
        except _Failure as e:
            reason = str(e)
        except Exception as e:  # noqa: BLE001 - one error's failure must never stop a build
            reason = f"{type(e).__name__}: {e}"
        with self._lock:
            self._failed.add(key)
            self.failures.append((error.id, " ".join(reason.split())[:300]))
        return None

    def _ask(self, error: ErrorEntry) -> Reply:
        body = {
            "model": self.config.model,
            "messages": build_messages(error, self.derived(error)),
            "response_format": {"type": "json_object"},
            "temperature": 0,
            "max_tokens": 4096,
        }
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self.config.api_key:
            headers["Authorization"] = f"Bearer {self.config.api_key}"
        request = urllib.request.Request(
            self.config.url.rstrip("/") + "/chat/completions", data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        return parse_reply(_post(request, self.config.timeout))


def _post(request: urllib.request.Request, timeout: float) -> bytes:
    try:
        with urllib.request.build_opener().open(request, timeout=timeout) as response:
            data = response.read(MAX_REPLY_BYTES + 1)
    except urllib.error.HTTPError as e:
        e.close()
        raise _Failure(f"HTTP {e.code} {e.reason}") from None
    except TimeoutError:
        raise _Failure(f"timed out after {timeout:g} s") from None
    except urllib.error.URLError as e:
        if isinstance(e.reason, TimeoutError):
            raise _Failure(f"timed out after {timeout:g} s") from None
        raise _Failure(f"cannot reach the server: {e.reason}") from None
    except (OSError, http.client.HTTPException) as e:
        raise _Failure(f"connection failed: {type(e).__name__}: {e}") from None
    if len(data) > MAX_REPLY_BYTES:
        raise _Failure(f"reply larger than {MAX_REPLY_BYTES} bytes")
    return data


def parse_reply(data: bytes | str) -> Reply:
    """The annotation inside a chat-completions response; _Failure saying what is wrong with it."""
    try:
        content = json.loads(data)["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise _Failure("not a chat-completions response") from None
    if not isinstance(content, str):
        raise _Failure("the reply has no text")
    content = re.sub(r"^\s*```(?:json)?(.*?)```\s*$", r"\1", content, flags=re.S | re.I)
    try:
        fields = json.loads(content)
    except ValueError as e:
        raise _Failure(f"the reply is not JSON: {e}") from None
    try:
        return Reply.model_validate(fields)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "reply"
        more = f" (and {e.error_count() - 1} more)" if e.error_count() > 1 else ""
        raise _Failure(f"invalid reply: {where}: {first['msg']}{more}") from None


def _read_cache(path: Path) -> Reply | None:
    """A cached reply; None when missing or unreadable (it is then asked for again and rewritten)."""
    try:
        return Reply.model_validate(json.loads(path.read_bytes())["reply"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_cache(path: Path, error: ErrorEntry, model: str, reply: Reply) -> None:
    """Atomically: a reader sees the old file, the new one or none, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"error": error.id, "model": model, "prompt_version": PROMPT_VERSION, "reply": reply.model_dump(mode="json")}
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data, sort_keys=True, ensure_ascii=False, indent=1) + "\n")
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
