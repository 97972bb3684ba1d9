"""Looking up a pasted error: the compact index, reading a paste, matching by evidence, and the answer.

site/assets/lookup.js is the same algorithm for the site's box; tests/lookup/vectors.json keeps the two in step.

A paste is read into the exceptions it shows (anywhere in a line, behind any log prefix, split by
process), each with its frames. Each exception's message is matched against every release's
templates by the information their literal words carry: a weighted longest common subsequence of
words, so text added, removed or reordered around a message costs a little instead of everything,
and a template whose literal text is `{what}: {x}` carries no weight at all. Frames in `vllm/`, the
exception's type and the vLLM version the paste names confirm or break ties. The answer is the root
cause: the last exception that is not a wrapper pointing elsewhere ("see root cause above"), or a
named error from outside vLLM (torch, CUDA, NCCL, ...), or, below a calibrated confidence, none.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field, replace

from .messages import parts_of_template
from .facts import assert_key
from .model import KnowledgeBase

INDEX_FORMAT = 3
MAX_PASTE = 200_000  # characters read from a paste; the end of a log is what matters
MAX_MESSAGE = 4_000  # characters of one message matched: the rest is values and lists
MAX_CONTINUATION = 40  # lines a message may continue over
MAX_STEPS = 5000  # exact-matcher steps per template: a pathological paste gives up instead of hanging
SHORTLIST = 40  # candidates aligned word by word: those sharing the most information with the message
RARE = 400  # words of at least this weight (centibits; in under 1 template in 16) find candidates
ENOUGH = 4000  # information (centibits, about five distinctive words) for full confidence
OUTSIDE_DISCOUNT = 4  # words of a message outside the matched span count a quarter
CONFIDENT = {"high": 0.9, "medium": 0.5}  # calibrated on the tuning half of tests/lookup/pastes/
EXACT_LETTERS = 12  # literal characters an exact match needs to count on its own
EXACT_BONUS = 0.35
CUT_VALUE = 40  # characters a message cut short inside a value may end with: longer, it is not a value
CUT_SAID = 40  # ... unless this many literal characters of the template came before it (a long list, cut)
EXACTLY = ("exact", "truncated", "extended")  # the template's literal text in order, as far as the message goes
HOW_RANK = {"exact": 3, "truncated": 2, "extended": 2, "similar": 1, "frame": 0}
CLOSE = 0.05  # a runner-up this near makes an answer no better than medium
WRAPPERS = {"points": 1, "embeds": 2}  # an error pointing at one printed earlier; one carrying the caught one's text
# The traceback's last vLLM frame is a line the error is raised at, or in its function, or (when the
# traceback ends there) in neither; the pasted type is the error's or not; the error is in the release the paste names.
FRAME_BONUS = {"exact": 0.5, "function": 0.05, "elsewhere": -0.15}
TYPE_BONUS = {"agrees": 0.03, "disagrees": -0.1}
RELEASE_BONUS = 0.04

# --- the index ------------------------------------------------------------------------------------


def index_parts(template: str | None) -> list:
    """Literal text as strings, placeholders as one-element lists: the form both matchers read."""
    if not template:
        return []
    return [[text] if hole else text for hole, text in parts_of_template(template)]


def exception_names(exception: str) -> list[str]:
    """The class names a paste may show for an error; none for a factory call, whose class is unknown."""
    names = [part.strip().rpartition(".")[2] for part in exception.split("|")] if exception else []
    return [name for name in names if name.isidentifier()]


def index_sites(record) -> list[list]:
    """[path, line, function] of every place the error is raised, in every release the site covers.

    A traceback names the line of the release it came from: a frame at line 467 of 0.28.0
    pins the error that 0.33.0 raises at 469.
    """
    sites = [(s.path, s.line, s.function) for s in record.sites]
    if record.history:
        sites += [(s.path, s.line, s.function) for a in reversed(record.history.releases) for s in a.sites]
    return [[path, line, function.rpartition(".")[2]] for path, line, function in dict.fromkeys(sites)]


def release_spans(record, refs: list[str]) -> list[list[int]]:
    """The releases an error is in, as [first, last] index ranges into `refs`."""
    if not record.history:
        return [[len(refs) - 1, len(refs) - 1]] if refs else []
    at = sorted(refs.index(a.ref) for a in record.history.releases if a.ref in refs)
    spans: list[list[int]] = []
    for k in at:
        if spans and spans[-1][1] == k - 1:
            spans[-1][1] = k
        else:
            spans.append([k, k])
    return spans


def error_words(error: dict) -> list[str]:
    """The words of an index error's template and of the other messages its code builds."""
    return words(" ".join(literal_text(parts) for parts in [error["p"], *error.get("a", [])]))


def weights(records_tokens: list[list[str]]) -> dict[str, int]:
    """Each word's information in centibits: -log2 of the share of templates that use it."""
    df: dict[str, int] = {}
    for toks in records_tokens:
        for t in set(toks):
            df[t] = df.get(t, 0) + 1
    n = max(1, len(records_tokens))
    return {t: max(1, round(100 * math.log2(n / d))) for t, d in sorted(df.items())}


def build_index(kb: KnowledgeBase) -> dict:
    """The compact index the site's box and the CLI share: per error its id, types, message parts,
    sites, releases and whether it is a wrapper; the words' weights; the errors from outside vLLM."""
    refs = list(kb.history.refs) if kb.history else [kb.snapshot.ref]
    paths: dict[str, int] = {}
    errors = []
    for record in kb.records:
        sites = [[paths.setdefault(path, len(paths)), line, function] for path, line, function in index_sites(record)]
        entry = {
            "i": record.id,
            "t": exception_names(record.exception),
            "p": index_parts(record.template),
            "s": sites,
            "n": record.title,
            "r": release_spans(record, refs),
        }
        others = (*record.variants, *record.annotation.logged)  # other messages its code builds; what vLLM logs in its place
        if others:
            entry["a"] = [index_parts(v) for v in others]
        if record.wrapper:
            entry["w"] = WRAPPERS[record.wrapper]
        if record.root_causes:
            entry["c"] = list(record.root_causes)  # the errors reported most often behind this wrapper
        errors.append(entry)
    vocabulary = weights([error_words(e) for e in errors])
    asserts = [[a.expression, paths.setdefault(a.path, len(paths)), a.function.rpartition(".")[2], line_spans(a.lines, refs)]
               for a in kb.asserts]
    snap = kb.snapshot
    return {
        "format": INDEX_FORMAT,
        "release": snap.version or snap.ref,
        "releases": refs,
        "commit": snap.upstream_commit,
        "errors": errors,
        "v": vocabulary,
        "o": [asdict(o) for o in kb.outside],
        "files": list(paths),  # the sites' paths, which "s" and "b" name by their place here
        "b": asserts,
    }


def line_spans(lines: tuple[tuple[str, int], ...], refs: list[str]) -> list[int]:
    """[first, last, line, first, last, line, ...]: the releases (indexes into `refs`) an assert is in, a span per run
    at the same line; flat, as 13,000 asserts of 73 releases make 78,000 spans."""
    spans: list[int] = []
    for ref, line in lines:
        k = refs.index(ref)
        if spans and spans[-2] == k - 1 and spans[-1] == line:
            spans[-2] = k
        else:
            spans += [k, k, line]
    return spans


# --- reading a paste --------------------------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\[(?:[0-9]{1,2};)*[0-9]{1,2}m")  # colours, also with the escape lost ("[0;36m")
PROCESS = re.compile(r"^[ \t]*\((?P<tag>[A-Za-z_][A-Za-z0-9_-]*(?: [A-Za-z0-9_=-]+)?) pid=[0-9]+(?:, ip=[0-9A-Fa-f.:]+)?\)[ \t]?")
# Log prefixes, peeled off the start of each line in any order: vLLM's logger (both formats), ranks,
# docker compose, timestamps, journald and syslog, Kubernetes' CRI format, Python's logging.
PREFIXES = [
    re.compile(r"^[ \t]*(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)[ \t]+[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]+)?[ \t]+(?:\[?[^\]\s]*\][ \t]?)?"),
    re.compile(r"^[ \t]*\[rank[0-9]+\]:[ \t]?"),
    re.compile(r"^[ \t]*[A-Za-z0-9_.-]+-[0-9]+[ \t]+\|[ \t]?"),
    re.compile(r"^[ \t]*\[?[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?\]?[ \t]+(?:\|[ \t]*)?"),
    re.compile(r"^[ \t]*[A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} [A-Za-z0-9_.-]+ [A-Za-z0-9_.@/-]+(?:\[[0-9]+\])?:[ \t]?"),
    re.compile(r"^[ \t]*(?:stdout|stderr) [FP] "),
    re.compile(r"^[ \t]*(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)(?::|[ \t]+-|[ \t]*\|)[ \t]+"),
]
FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>[0-9]+), in (?P<func>[^\s]+)')
CODE = re.compile(r"\s*(?:raise|assert)(?:\s|\(|$)")  # a line of code, where a log prefix ate the indent that tells it
RAISE_NEW = re.compile(r"raise (?:[a-z_][a-z0-9_]*\.)*[A-Z][A-Za-z0-9_]*\(")  # `raise ValueError(`, `raise errors.ConfigError(`: a new exception
LIBRARY = re.compile(r"/(?:site|dist)-packages/([A-Za-z0-9_]+)/")  # the installed package a frame's file is in
_NAME = r"(?:[A-Za-z_][A-Za-z0-9_]*\.)*[A-Za-z_]?[A-Za-z0-9_]*(?:Error|Exception|Exit|Interrupt|Iteration)"
EXCEPTION = re.compile(r"(?:^|[^A-Za-z0-9_.])(?P<type>" + _NAME + r")`?:(?:[ \t\u00a0]+(?P<message>.*))?$")
BARE_EXCEPTION = re.compile(r"^\s*(?P<type>" + _NAME + r")\s*$")
SAID_ERROR = re.compile(r"(?:^|[\s,;(])(?:[Ee]rror|ERROR|[Ee]xception)[ \t]*:[ \t]*(?P<message>[^\s/].*)$")
NAMED_ERROR = re.compile(r"(?:^|[^A-Za-z0-9_])(?P<message>[A-Z][A-Z0-9]+ (?:error|Error|ERROR)[ \t]*:[ \t]*[^\s/].*)$")  # "NCCL error: ..."
REPR = re.compile(r"(?:^|[^A-Za-z0-9_.])(?P<type>" + _NAME + r")\((?P<q>['\"])(?P<message>(?:\\.|(?!(?P=q)).)+?)(?P=q)[,)]")  # ValueError('...')
STOP = re.compile(r"```|[\u3000-\u9fff\uac00-\ud7af\uff00-\uffef]")  # where a message stops: a Markdown fence, CJK prose
QUOTED = re.compile(r'["\u201c](?P<q>[^"\u201c\u201d\n]{20,})["\u201d]')  # a message quoted in prose
ELLIPSIS = re.compile(r" ?(?:\.\.\.|\u2026)\Z")  # a message the reporter cut short
STATUS = re.compile(r"Error code: [0-9]{3} - ")  # how openai-python begins an error response it raises
JSON_MESSAGE = re.compile(r'"(?:message|detail)"\s*:\s*"((?:[^"\\]|\\.)*)"')
PY_MESSAGE = re.compile(r"'(?:message|detail)'\s*:?\s*'((?:[^'\\]|\\.)*)'")  # the same response printed as a Python dict
# vLLM 0.5 - 0.6.3's worker log: "Exception in worker W while processing method m: <message>, <traceback>"
WORKER_LOG = re.compile(r"while processing method [^\s:]+: (?P<message>\S.*?), Traceback \(most recent call last\):[ \t]*$")
LOGGED_ERROR = re.compile(r"(?:^|[\s|])ERROR[ \t]+\[[^\]\n]*\][ \t]+(?P<message>\S.*)$")  # "ERROR [request 12] <message>"
ARGPARSE = re.compile(r"^argument [^\s:]+(?:/[^\s:]+)?: ")
UNDERSCORE_BOLD = re.compile(r"""__([^_ ].*[.!?)\]'"])__""")
_QUOTED_ITEM = r"'(?:[^'\\]|\\.)*'" + r'|"(?:[^"\\]|\\.)*"'
TUPLE_ITEM = re.compile(_QUOTED_ITEM + r"""|[^'",()]+""")
# raise E("text ", f"more {x}") prints its arguments as a tuple: ('text ', 'more 1')
TUPLE_REPR = re.compile(r"\((?:" + _QUOTED_ITEM + r")(?:, ?(?:" + TUPLE_ITEM.pattern + r"))+,?\)\Z")
ASSERT_LINE = re.compile(r"assert(?![A-Za-z0-9_])")
# Errors Python itself raises where an operation fails (`len(x)` of an object without one): at a line of a
# library's own code that is no `raise`, the library's code failed there.
PYTHON_RAISES = ("TypeError", "AttributeError", "IndexError", "KeyError", "NameError", "UnboundLocalError", "ZeroDivisionError", "RecursionError")
ASSERT_TEXT = re.compile(r"(?:^|[^A-Za-z0-9_.])assert[ \t]+(?P<expr>[^\s,].*)$")  # `assert x is not None` anywhere in a line
MAX_ASSERT_LINES = 10  # lines an expression in an open parenthesis may continue over
ASSERT_LETTERS = 16  # an expression this long is distinctive on its own; a shorter one needs a frame to agree
CHAIN = re.compile(r"^(?:During handling of the above exception, another exception occurred:|The above exception was the direct cause of the following exception:)\s*$")
PYDANTIC = re.compile(r"(?:Value|Assertion) error, (?P<message>.*?)(?: \[type=[A-Za-z0-9_]+, input_value=.*)?$", re.S)
PYDANTIC_DICT = re.compile(r"""['"]msg['"]:[ \t]*(?P<q>['"])(?:Value|Assertion) error, (?P<message>(?:\\.|(?!(?P=q))[^\n])*)(?P=q)""")
VALIDATION_SUFFIX = re.compile(r" \(parameter=[^,()]*, value=.*\)$", re.S)
VERSION = re.compile(r"vllm(?:[ _-]?api[ _-]?server)?(?:[ _-]?version)?[ =:/_-]*v?([0-9]+\.[0-9]+\.[0-9]+(?:\.post[0-9]+)?)")
_SPACE = re.compile(r"\s+")
_WORD = re.compile(r"[A-Za-z0-9]+")
_UPPER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


def ascii_lower(text: str) -> str:
    """Lower case for ASCII letters only: the same in Python and JavaScript, whatever else the text holds."""
    return text.translate(_UPPER)


def words(text: str) -> list[str]:
    """The words matching compares: runs of ASCII letters and digits, lower case, no bare numbers (values, mostly)."""
    return [w for w in (ascii_lower(m) for m in _WORD.findall(text)) if len(w) > 1 and not w.isdigit()]


def literal_text(parts: list) -> str:
    return " ".join(p for p in parts if isinstance(p, str))


@dataclass(frozen=True)
class Frame:
    path: str  # inside the vllm package: "vllm/config/model.py"; "" for frames outside vLLM
    line: int
    function: str
    library: str = ""  # for a frame in another installed package's code: its name ("transformers")


@dataclass(frozen=True)
class Raised:
    type: str  # as pasted: "ValueError", "vllm.exceptions.VLLMValidationError", "" when only a message was pasted
    message: str
    frames: tuple[Frame, ...] = ()
    process: str = ""  # the `(EngineCore_DP0 pid=1)` tag's name, where the log has one
    chained: bool = False  # raised while handling the exception before it ("During handling of the above exception ...")
    source: str = ""  # the line of code Python printed under its last frame, where the paste has it


@dataclass(frozen=True)
class Paste:
    raised: tuple[Raised, ...]  # in the order they appear: causes first
    version: str | None = None  # a vLLM version the paste mentions
    asserts: tuple[str, ...] = ()  # what follows `assert ` on a line, in order: code Python printed, or a title quoting it


@dataclass(frozen=True)
class _Row:
    process: str
    prefix: str  # what was peeled off besides the process tag: lines of one log record share it
    text: str


def peel(line: str) -> _Row:
    """A log line without its prefixes."""
    process, peeled, changed = "", [], True
    while changed:
        changed = False
        tag = PROCESS.match(line)
        if tag:
            process = process or tag.group("tag")
            line, changed = line[tag.end() :], True
        for prefix in PREFIXES:
            found = prefix.match(line)
            if found and found.end() > 0:
                peeled.append(found.group(0).strip())
                line, changed = line[found.end() :], True
    return _Row(process, " ".join(peeled), line)


def vllm_path(file: str) -> str:
    """`/usr/lib/python3/site-packages/vllm/config/model.py` -> `vllm/config/model.py`."""
    file = file.replace("\\", "/")
    at = file.rfind("/vllm/")
    return file[at + 1 :] if at >= 0 else ("vllm/" + file[5:] if file.startswith("vllm/") else "")


def exception_at(text: str) -> tuple[str, str] | None:
    """(type, message) of an exception line: `Name: message` anywhere in the line, the first such name."""
    worker = WORKER_LOG.search(text)
    if worker:
        return "", worker.group("message")
    found = EXCEPTION.search(text)
    if found:
        return found.group("type"), found.group("message") or ""
    bare = BARE_EXCEPTION.match(text)
    if bare:
        return bare.group("type"), ""
    # "... NCCL error: <message>" (the library's name is part of it), "... I got an error: <message>", "Leave chat, error: <message>"
    said = NAMED_ERROR.search(text) or SAID_ERROR.search(text) or LOGGED_ERROR.search(text)
    return ("", said.group("message")) if said else None


def _rows(text: str) -> list[_Row]:
    """The paste's lines without their prefixes. A line with no prefix of its own after a tagged one
    belongs to it (a long line wrapped when copied); a line holding several frames (newlines lost
    when copied) is split before each."""
    rows: list[_Row] = []
    for line in ANSI.sub("", text[-MAX_PASTE:]).split("\n"):
        row = peel(line.rstrip("\r"))
        if (rows and not row.prefix and not row.process and not FRAME.search(rows[-1].text) and not FRAME.search(row.text)
                and FRAME.search(rows[-1].text + row.text)):
            rows[-1] = _Row(rows[-1].process, rows[-1].prefix, rows[-1].text + row.text)  # a frame wrapped mid-word: `", l` / `ine 743, in f`
            continue
        if rows and not row.process and not row.prefix and rows[-1].process and row.text.strip():
            row = _Row(rows[-1].process, rows[-1].prefix, row.text)
        pieces = row.text.split('File "')
        if len(pieces) > 2:
            rows += [_Row(row.process, row.prefix, piece if k == 0 else 'File "' + piece) for k, piece in enumerate(pieces) if piece.strip()]
        else:
            rows.append(row)
    return rows


def _frame(found: re.Match) -> Frame:
    number = found.group("line")
    file = found.group("file")
    library = LIBRARY.search(file.replace("\\", "/"))
    return Frame(vllm_path(file), int(number) if len(number) <= 9 else 0, found.group("func"),
                 library.group(1) if library and library.group(1) != "vllm" else "")


def read_paste(text: str) -> Paste:
    """The exceptions a paste shows, in order, each with its message and the frames above it.

    The lines of each process (its `(Name pid=N)` tag) are read on their own, so interleaved
    logs do not mix one process's traceback into another's.
    """
    rows = _rows(text)
    version = next((m.group(1) for row in rows for m in [VERSION.search(ascii_lower(row.text))] if m), None)
    streams: dict[str, list[int]] = {}
    for k, row in enumerate(rows):
        streams.setdefault(row.process, []).append(k)
    found: list[tuple[int, Raised]] = []
    for process, at in streams.items():
        frames: list[Frame] = []
        chained = False
        source = ""
        k = 0
        while k < len(at):
            row = rows[at[k]]
            if CHAIN.match(row.text.strip()):
                chained = bool(found) and found[-1][1].process == process
            frame = FRAME.search(row.text)
            rest = row.text
            if frame:
                frames.append(_frame(frame))
                rest, source = row.text[frame.end() :], ""
            elif k and FRAME.search(rows[at[k - 1]].text) and _under_frame(row.text, rows[at[k - 1]].text):
                source = row.text.strip()  # the source line Python prints under a frame: `raise RuntimeError(f"NCCL error: ...")`
                k += 1
                continue
            exc = exception_at(rest)
            if exc is None:
                found += [(at[k], r) for r in _reprs(rest, frames, process)]
                k += 1
                continue
            message = [exc[1]]
            j = k + 1
            bare = BARE_EXCEPTION.match(rest) is not None  # `AssertionError` alone: no message, what follows is other output
            while not bare and j < len(at) and j - k <= MAX_CONTINUATION and _continues(rows[at[j]], row.prefix):
                message.append(rows[at[j]].text.strip())
                j += 1
            found += [(at[k], r) for r in _reprs(exc[1], (), process)]  # the exception it quotes came first
            found.append((at[k], Raised(exc[0], unwrap("\n".join(message)), tuple(frames), process, chained, source if frames else "")))
            frames, chained, source = [], False, ""
            k = j
        if frames and ASSERT_LINE.match(source):  # the traceback stops at an `assert` of vLLM's: the paste ends before its AssertionError
            found.append((at[-1], Raised("AssertionError", "", tuple(frames), process, chained, source)))
    found.sort(key=lambda item: item[0])
    raised = [r for _, r in found]
    asserts = tuple(assert_text(rows, k) for k in range(len(rows)) if ASSERT_TEXT.search(rows[k].text))
    if not raised:
        under = {k for k in range(1, len(rows)) if FRAME.search(rows[k - 1].text) and _under_frame(rows[k].text, rows[k - 1].text)}
        body = "\n".join(row.text for k, row in enumerate(rows)
                         if row.text.strip() and k not in under and not FRAME.search(row.text) and not row.text.lstrip().startswith("Traceback"))
        frames = tuple(_frame(m) for row in rows for m in [FRAME.search(row.text)] if m)
        response, printed = JSON_MESSAGE.search(body), PY_MESSAGE.search(body)
        if response:  # an API response: {"message": "...", "type": "BadRequestError", ...}; its "type" is OpenAI's, not a class
            raised.append(Raised("", unwrap(_json_string(response.group(1))), frames))
        elif printed:
            raised.append(Raised("", unwrap(printed.group(1).replace("\\'", "'")), frames))
        else:
            # Prose in another script around the message (CJK): the longest stretch without it is the message.
            prose = max(STOP.split(body), key=lambda piece: len(words(piece)))
            raised.append(Raised("", unwrap(prose), frames))
            quoted = max((m.group("q") for m in QUOTED.finditer(body)), key=len, default="")
            if len(quoted.split()) >= 3:  # prose quoting the error: "... fails with "<the message>" when ..."
                raised.append(Raised("", unwrap(quoted), frames))
    return Paste(tuple(raised), version, asserts)


def assert_text(rows: list[_Row], k: int) -> str:
    """What follows `assert ` on row k, with the rows it continues over while a parenthesis is open."""
    parts = [ASSERT_TEXT.search(rows[k].text).group("expr")]
    for row in rows[k + 1 : k + 1 + MAX_ASSERT_LINES]:
        if "".join(parts).count("(") <= "".join(parts).count(")"):
            break
        parts.append(row.text.strip())
    return " ".join(parts)


def _reprs(text: str, frames: tuple | list, process: str) -> list[Raised]:
    """The exceptions a line shows as Python prints them in a container: `{'error': ValueError('...')}`."""
    return [Raised(r.group("type"), unwrap(r.group("message").replace("\\" + r.group("q"), r.group("q"))), tuple(frames), process)
            for r in REPR.finditer(text)]


def _under_frame(text: str, frame: str) -> bool:
    """Whether a line below a frame is the source line Python prints there (indented more, or code)."""
    return _indent(text) > _indent(frame) or CODE.match(text) is not None


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" \t"))


def _json_string(raw: str) -> str:
    try:
        return json.loads('"' + raw + '"')
    except ValueError:
        return raw


def _continues(row: _Row, prefix: str) -> bool:
    """Whether a line goes on with the message above it: the same log record, and not a new part of a traceback."""
    text = row.text.strip()
    if row.prefix != prefix or not text or FRAME.search(text) or CHAIN.match(text) or text.startswith("Traceback"):
        return False
    return exception_at(text) is None


def unwrap(message: str) -> str:
    """The message vLLM raised, out of pydantic's report and without VLLMValidationError's suffix."""
    listed = PYDANTIC_DICT.search(message)
    if listed:  # pydantic's errors as a list of dicts, printed inside an API response: {'msg': 'Value error, ...'}
        message = listed.group("message").replace("\\'", "'")
    elif STATUS.match(message):  # an HTTP client's error: "Error code: 400 - {'error': {'message': '<vLLM's message>', ...}}"
        printed, response = PY_MESSAGE.search(message), JSON_MESSAGE.search(message)
        if printed or response:
            message = printed.group(1).replace("\\'", "'") if printed else _json_string(response.group(1))
    pydantic = PYDANTIC.search(message)
    if pydantic and "validation error" in message[: pydantic.start() + 40].lower() or message.startswith(("Value error, ", "Assertion error, ")):
        message = pydantic.group("message") if pydantic else message
    message = ARGPARSE.sub("", fold(STOP.split(message, 1)[0]))  # argparse prints a flag's ArgumentTypeError as "argument --flag: <message>"
    if TUPLE_REPR.match(message):
        message = joined_tuple(message)
    bold = UNDERSCORE_BOLD.fullmatch(message)
    if bold:  # Markdown's other bold, `__text__`, around a message that ends in punctuation (not a `__dunder__`)
        message = bold.group(1)
    if message.endswith(")"):  # the regex backtracks from every " (parameter=": only try it where it can end
        message = VALIDATION_SUFFIX.sub("", message)
    return ELLIPSIS.sub("", message)


def joined_tuple(message: str) -> str:
    """A tuple of a raise's arguments, printed: its strings joined as their author meant them to read."""
    text = ""
    for found in TUPLE_ITEM.finditer(message[1:-1]):
        item = found.group().strip()
        if not item:
            continue
        if item[0] in "'\"":
            item = re.sub(r"\\(.)", lambda e: " " if e.group(1) in "nt" else e.group(1), item[1:-1])
        text += item if not text or text[-1:].isspace() or item[:1].isspace() else " " + item
    return fold(text)


# --- matching ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One error of the index, prepared once for matching many pastes."""

    id: str
    types: tuple[str, ...]
    parts: list
    words: tuple[str, ...]  # the literal text's words, in order
    vocabulary: frozenset[str]  # the same, as a set
    weights: tuple[int, ...]
    total: int  # the literal text's information
    letters: int  # the literal text's length, white space folded
    holes: int  # placeholders
    sites: tuple
    title: str
    spans: tuple  # the releases it is in: (first, last) indexes into the index's releases
    wrapper: int  # 0, or WRAPPERS' kind


@dataclass(frozen=True)
class Prepared:
    entries: list[Entry]
    vocabulary: dict[str, int]
    postings: dict[str, list[int]]  # word -> the entries using it
    releases: list[str]
    release: str
    outside: list[dict]
    singles_out: int  # information (centibits) that words must carry to be in one template of the index, by chance
    asserts: dict[str, list[tuple]]  # expression key -> (path, function, [[first, last, line], ...]) of each assert without a message


def prepare(index: dict) -> Prepared:
    vocabulary, files = index["v"], index["files"]
    entries, postings = [], {}
    for error in index["errors"]:
        sites = tuple((files[p], line, function) for p, line, function in error["s"])
        for parts in [error["p"], *error.get("a", [])]:  # the template, then the other messages its code builds
            k = len(entries)
            toks = words(literal_text(parts))
            ws = tuple(vocabulary.get(t, 0) for t in toks)
            letters = sum(len(fold(p)) for p in parts if isinstance(p, str))
            holes = sum(1 for p in parts if not isinstance(p, str))
            entries.append(Entry(error["i"], tuple(error["t"]), parts, tuple(toks), frozenset(toks), ws, sum(ws), letters, holes, sites,
                                 error["n"], tuple(map(tuple, error["r"])), error.get("w", 0)))
            for t in dict.fromkeys(toks):
                postings.setdefault(t, []).append(k)
    asserts: dict[str, list[tuple]] = {}
    for key, path, function, flat in index.get("b", []):
        spans = [flat[k : k + 3] for k in range(0, len(flat), 3)]
        asserts.setdefault(key, []).append((files[path], function, spans))
    singles_out = math.floor(100 * math.log2(max(2, len(index["errors"]))))  # "NCCL error: {e}": few letters, rare words
    return Prepared(entries, vocabulary, postings, index["releases"], index["release"], index.get("o", []), singles_out, asserts)


@dataclass(frozen=True)
class Match:
    id: str
    title: str
    score: float  # 0 to about 1.2: agreement of the message, times its information, plus frames, type and version
    how: str  # "exact" (every literal in order), "similar" (word alignment), "frame" (a traceback line alone)
    values: dict[str, str] = field(default_factory=dict)  # placeholder -> the text that filled it, for exact matches
    information: int = 0  # centibits of the template's words found in order
    type_agrees: bool | None = None
    frame_agrees: bool = False
    wrapper: int = 0  # WRAPPERS' kind, 0 for none
    close: bool = False  # another candidate scores within CLOSE of it

    @property
    def confidence(self) -> str:
        """High needs the score, no close runner-up, a type that does not contradict, and the literal text in
        order or a frame that agrees: shared words alone, however many, are no more than medium."""
        level = next((level for level, floor in CONFIDENT.items() if self.score >= floor), "low")
        if level == "high" and (self.close or self.type_agrees is False or self.how not in EXACTLY and not self.frame_agrees):
            return "medium"
        return level


def _lcs_row(pairs: list[tuple[str, int]], b: list[str]) -> list[int]:
    """The last row of the weighted longest-common-subsequence table: for each prefix of `b`, the most information."""
    prev = [0] * (len(b) + 1)
    for t, w in pairs:
        cur = [0] * (len(b) + 1)
        for j, u in enumerate(b):
            best = prev[j] + w if t == u else 0
            cur[j + 1] = max(best, prev[j + 1], cur[j])
        prev = cur
    return prev


def aligned(a: tuple[str, ...], wa: tuple[int, ...], b: list[str]) -> tuple[int, int, int]:
    """The most information of `a`'s words that `b` holds in the same order (a weighted longest common
    subsequence), and the tightest stretch of `b` that holds it: (information, first, last) positions."""
    keep = set(b)
    pairs = [(t, w) for t, w in zip(a, wa) if t in keep]
    mine = {t for t, _ in pairs}
    at = [j for j, t in enumerate(b) if t in mine]
    b = [b[j] for j in at]
    if not pairs or not b:
        return 0, 0, -1
    row = _lcs_row(pairs, b)
    best = row[-1]
    end = next(j for j in range(len(b) + 1) if row[j] == best)  # the shortest prefix that holds it all
    back = _lcs_row(pairs[::-1], b[:end][::-1])
    size = next(k for k in range(end + 1) if back[k] == best)  # and the shortest suffix of that prefix
    return best, at[end - size], at[end - 1]


def version_key(version: str) -> list[int]:
    """`v0.8.5.post1` -> [0, 8, 5, 1]: releases compare by their numbers."""
    return [int(n) for n in re.findall(r"[0-9]+", version)]


def release_at(releases: list[str], version: str | None) -> int | None:
    """The index of the newest release at or before `version`, None when the paste names none."""
    if not version:
        return None
    want = version_key(version)
    at = [k for k, ref in enumerate(releases) if version_key(ref) <= want]
    return at[-1] if at else None


def pinned(entry: Entry, frame: Frame) -> bool:
    """The frame is at one of the error's sites: its line, in the function it names (or the start of it, where a
    terminal wrapped the line); the same line of another release holds other code."""
    function = frame.function.rpartition(".")[2]
    return any(s[0] == frame.path and s[1] == frame.line and s[2].startswith(function) for s in entry.sites)


def score_entries(prepared: Prepared, raised: Raised, version: str | None, top: int = 5) -> list[Match]:
    """The errors that best explain one exception of a paste, best first."""
    text = fold(raised.message)[:MAX_MESSAGE]
    toks = words(text)
    tw = [prepared.vocabulary.get(t, 0) for t in toks]
    pasted_type = raised.type.rpartition(".")[2]
    if pasted_type == "ValidationError":
        pasted_type = "ValueError"  # pydantic wraps the ValueError a validator raised
    vllm_frames = [f for f in raised.frames if f.path]
    last = vllm_frames[-1] if vllm_frames else None
    deepest = bool(last) and raised.frames[-1] == last  # the traceback ends in vLLM: the raise is in that function
    at = release_at(prepared.releases, version)

    # Candidates share a rare word with the message (or, if it has none, one of its three rarest).
    known = sorted({t for t in toks if prepared.vocabulary.get(t, 0)}, key=lambda t: (-prepared.vocabulary[t], t))
    finders = [t for t in known if prepared.vocabulary[t] >= RARE] or known[:3]
    reached = sorted({k for t in finders for k in prepared.postings.get(t, ())})
    bound = {k: sum(prepared.vocabulary[t] for t in known if t in prepared.entries[k].vocabulary) for k in reached}
    # Ranked by the information shared times the share of the template's it is: a long message shares many
    # words with long templates by chance.
    shortlist = sorted(bound, key=lambda k: (-bound[k] * bound[k] / max(1, prepared.entries[k].total), k))[:SHORTLIST]
    if last:
        shortlist += [k for k, e in enumerate(prepared.entries) if k not in bound and pinned(e, last)]

    found = []
    for k in shortlist:
        entry = prepared.entries[k]
        information, start, stop = aligned(entry.words, entry.weights, toks) if entry.total else (0, 0, -1)
        how, values, chars = match_how(entry.parts, text) if information and text else ("similar" if information else "frame", {}, 0)
        score = 0.0
        if information:
            inside, everything = sum(tw[start : stop + 1]), sum(tw)
            # The F-measure of the template's words found and of the message's words explained; an exact fit
            # explains all of the message, values included.
            # A message cut short is measured against the template's text as far as it goes; the rest, unsaid,
            # counts like words of the message outside the match.
            said = sum(entry.weights[: prefix_words(entry.parts, chars)]) if how == "truncated" else entry.total
            total = max(said, information) + (entry.total - said) / OUTSIDE_DISCOUNT
            agreement = 1.0 if how == "exact" else 2 * information / (total + inside + (everything - inside) / OUTSIDE_DISCOUNT)
            score = agreement * min(1.0, information / ENOUGH)
        exact_frame = bool(last and pinned(entry, last))
        frame_agrees = exact_frame or bool(last and any(s[0] == last.path and s[2] == last.function for s in entry.sites))
        if not score and not exact_frame:
            continue
        type_agrees = (pasted_type in entry.types) if pasted_type and entry.types else None
        if how in EXACTLY and (entry.letters >= EXACT_LETTERS or how == "exact" and information >= prepared.singles_out):
            # every literal in order, and enough of them (or words rare enough): whatever the words weigh elsewhere; half
            # as much after a leading placeholder that few words follow (`{x} is an empty sequence` takes any text)
            score += EXACT_BONUS if isinstance(entry.parts[0], str) or information >= ENOUGH else EXACT_BONUS / 2
        score += FRAME_BONUS["exact"] if exact_frame else FRAME_BONUS["function"] if frame_agrees else FRAME_BONUS["elsewhere"] if deepest else 0.0
        score += TYPE_BONUS["agrees"] if type_agrees is True else TYPE_BONUS["disagrees"] if type_agrees is False else 0.0
        if at is not None and any(a <= at <= b for a, b in entry.spans):
            score += RELEASE_BONUS
        match = Match(entry.id, entry.title, round(score, 4), how, values, information, type_agrees, frame_agrees, entry.wrapper)
        lived = sum(b - a + 1 for a, b in entry.spans)
        found.append((match, HOW_RANK[how], chars if how != "similar" else 0, -entry.holes, lived, entry.spans[-1][1] if entry.spans else -1))
    # Ties: the fuller fit, more information, more literal text matched, fewer placeholders, in more releases, in a newer one.
    found.sort(key=lambda f: (-f[0].score, -f[1], -f[0].information, -f[2], -f[3], -f[4], -f[5], f[0].id))
    matches: list[Match] = []
    for match, *_ in found:  # an error's best fitting message only
        if len(matches) < top and all(m.id != match.id for m in matches):
            matches.append(match)
    # The paste cannot tell apart candidates this near each other, nor two whose literal text it holds in order
    # (the same words in two releases, with a value where the other has text) unless a frame pins one.
    return [replace(m, close=True) if any(k != i and (abs(m.score - o.score) <= CLOSE or rivals(m, o)) for k, o in enumerate(matches)) else m
            for i, m in enumerate(matches)]


def rivals(m: Match, o: Match) -> bool:
    return m.how in EXACTLY and o.how in EXACTLY and not m.frame_agrees


def match_how(parts: list, text: str) -> tuple[str, dict[str, str], int]:
    """How a message fits a template's literal text in order: "exact" (all of it, with the values), "truncated"
    (the message stops inside it), "extended" (all of it, then more text), or "similar" (words only); with the
    values and the literal characters matched."""
    found = match_steps(parts, unmark(text))
    if found is None or found[0] == "truncated" and found[1] < EXACT_LETTERS:  # cut short before it says much
        return "similar", {}, 0
    if found[0] == "full":
        return "exact", found[2], found[1]
    return ("truncated" if found[0] == "truncated" else "extended"), {}, found[1]


def unmark(text: str) -> str:
    """Without Markdown's marks, which pastes gain or lose: `code` and **bold**."""
    return text.replace("`", "").replace("**", "")


def prefix_words(parts: list, chars: int) -> int:
    """How many of a template's words its first `chars` literal characters (as match_steps counts them) hold."""
    n = 0
    for p in parts:
        if isinstance(p, str):
            lit = fold(unmark(p))
            n += len(words(lit[:chars]))
            chars -= len(lit)
            if chars <= 0:
                break
    return n


def match_steps(parts: list, text: str, literals: list | None = None) -> tuple[str, int, dict[str, str]] | None:
    """Match a message against template parts: ("full", "truncated" or "extended", literal characters, values) or None.

    Literal text must appear in order (white space folded); each placeholder takes the
    shortest text that lets the rest match. A message cut short may end inside any part.
    """
    literals = literals or folded_literals(parts)
    steps = [0]

    def at(pi: int, ti: int, values: dict, said: int = 0) -> tuple[str, int, dict] | None:
        steps[0] += 1
        if steps[0] > MAX_STEPS:
            return None
        if pi == len(parts):
            return ("full", 0, values) if ti == len(text) else ("extended", 0, values)
        lit = literals[pi]
        if lit is not None:
            if lit[:1] == " " and ti and text[ti - 1] == " " and not text.startswith(lit, ti):
                lit = lit[1:]  # an empty value between two spaces, which folding made one
            if text.startswith(lit, ti):
                rest = at(pi + 1, ti + len(lit), values, said + len(lit.strip()))
                return (rest[0], rest[1] + len(lit.strip()), rest[2]) if rest else None
            tail = text[ti:]
            if tail and lit.startswith(tail) and len(tail.strip()) >= 1:
                return ("truncated", len(tail.strip()), values)
            return None
        name = parts[pi][0]
        if pi == len(parts) - 1:
            return ("full", 0, {**values, name: text[ti:]})
        nxt = literals[pi + 1]
        j = text.find(nxt, ti) if nxt else ti
        if nxt and nxt[:1] == " " and ti and text[ti - 1] == " " and text.startswith(nxt[1:], ti):
            j = ti  # an empty value between two spaces, which folding made one
        fallback = None  # a match cut short or with text over: the one with the most literal text, while a whole one is looked for
        while j >= 0:
            found = at(pi + 1, j, {**values, name: text[ti:j]}, said)
            if found and found[0] == "full":
                return found
            if found and (fallback is None or found[1] > fallback[1]):
                fallback = found
            j = text.find(nxt, j + 1) if nxt is not None else -1  # two placeholders meet: one split is enough
        if fallback:
            return fallback
        longest = CUT_VALUE if said < CUT_SAID else len(text)
        for cut in range(min(len(nxt or ""), len(text) - ti), 0, -1):  # the message stops inside the next literal,
            if text.endswith(nxt[:cut]):  # after a value of a value's length
                return ("truncated", len(nxt[:cut].strip()), {**values, name: text[ti : len(text) - cut]}) if len(text) - cut - ti <= longest else None
        if 0 < len(text) - ti <= longest:  # the message stops inside a value
            return ("truncated", 0, {**values, name: text[ti:]})
        return None

    if not parts:
        return None
    return at(0, 0, {})


def folded_literals(parts: list) -> list:
    """Each literal part with white space folded, keeping one space where it meets a placeholder, without
    backticks (Markdown eats them: pastes lose them)."""
    literals: list = []
    for k, p in enumerate(parts):
        if not isinstance(p, str):
            literals.append(None)
            continue
        p = unmark(p)
        lead = " " if p[:1].isspace() and k > 0 else ""
        trail = " " if p[-1:].isspace() and k < len(parts) - 1 else ""
        literals.append(lead + fold(p) + trail if fold(p) else (" " if p else ""))
    return literals



# --- the answer ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outside:
    name: str  # "torch-cuda-oom"
    says: str  # "This is a PyTorch CUDA out-of-memory error, raised outside vLLM."
    see: tuple[str, ...] = ()  # ids of the vLLM errors whose pages cover the usual cause


@dataclass(frozen=True)
class Finding:
    """What one exception of a paste is."""

    raised: Raised
    matches: tuple[Match, ...]  # best first; for "none", the closest candidates
    kind: str  # "vllm", "wrapper" (a vLLM error pointing at another), "outside", "assert" (a bare assert of vLLM's), "none"
    outside: Outside | None = None
    assertion: Frame | None = None  # for "assert": where (its code is the raised one's source)
    lines: tuple[tuple[str, int], ...] = ()  # for an assert found by its expression: (release, line) of each release with it


@dataclass(frozen=True)
class Answer:
    finding: Finding | None  # the root cause; None for an empty paste
    context: tuple[Finding, ...] = ()  # the other exceptions of the paste that explain it: wrappers after it, its causes
    version: str | None = None

    @property
    def kind(self) -> str:
        return self.finding.kind if self.finding else "none"


def outside_of(prepared: Prepared, raised: Raised) -> Outside | None:
    """The error from outside vLLM that an exception is, by the index's list, or by a foreign module in its type."""
    kind, message = ascii_lower(raised.type), ascii_lower(fold(raised.message))
    for known in prepared.outside:
        if all(re.search(known[key], text) for key, text in (("type", kind), ("message", message)) if known.get(key)):
            return Outside(known["name"], known["says"], tuple(known.get("see", ())))
    return None


def foreign_module(raised: Raised) -> Outside | None:
    """An exception whose type names a module of another library (`torch.`, `ray.exceptions.`)."""
    module = raised.type.partition(".")[0]
    if "." in raised.type and module not in ("vllm", "builtins", "pydantic", "pydantic_core"):
        return Outside("module", f"This is an error of {module}, raised outside vLLM.")
    return None


def bare_assert(raised: Raised) -> Frame | None:
    """Where vLLM's code failed an `assert` without a message, by the traceback's last frame and its code line.

    Such asserts are internal checks: the catalog keeps asserts with a message, so these have no page,
    but the paste itself says where and what.
    """
    last = raised.frames[-1] if raised.frames else None
    bare = raised.type.rpartition(".")[2] == "AssertionError" and not raised.message.strip()
    return last if bare and last and last.path and ASSERT_LINE.match(raised.source) else None


def assert_keys(text: str) -> list[str]:
    """The keys a pasted expression may have: all of it, then shorter at each space (prose may follow it), each
    also without a closing quote or mark that belongs to the prose ("assert x is None" ...)."""
    tokens = text.split()[:30]
    keys = []
    for n in range(len(tokens), 0, -1):
        key = assert_key(" ".join(tokens[:n]))
        keys += [key, key.rstrip('"`.,:;\u3002\uff0c\uff1a\uff1b')]  # and the full-width 。，：；of CJK prose
    return [k for k in dict.fromkeys(keys) if k]


def span_lines(prepared: Prepared, spans: list) -> tuple[tuple[str, int], ...]:
    """(release, line) for each release an assert's [first, last, line] spans cover."""
    return tuple((prepared.releases[k], n) for a, b, n in spans for k in range(a, b + 1))


def assert_lines(prepared: Prepared, code: str, frame: Frame) -> tuple[tuple[str, int], ...]:
    """(release, line) of the assert a traceback shows at `frame`, in each release that has it; none when it is unknown."""
    key = assert_key(ASSERT_LINE.sub("", code, count=1))
    function = frame.function.rpartition(".")[2]
    site = next((s for s in prepared.asserts.get(key, []) if s[0] == frame.path and s[1].rpartition(".")[2] == function), None)
    return span_lines(prepared, site[2]) if site else ()


def indexed_assert(prepared: Prepared, paste: Paste) -> Finding | None:
    """The assert without a message a paste quotes with no frame at it: by the expression after `assert `, or by
    an AssertionError's message that is the expression. Only one assert of the releases may have it (or one
    that the paste's frames or version single out), and a short expression needs a frame to agree."""
    frames = [f for r in paste.raised for f in r.frames if f.path]
    texts = [r.message for r in paste.raised if r.type.rpartition(".")[2] == "AssertionError" and r.message.strip()]
    at = release_at(prepared.releases, paste.version)
    for text in reversed([*texts, *paste.asserts]):  # the last one printed is nearest the failure
        for key in assert_keys(text):
            sites = prepared.asserts.get(key, [])
            if at is not None:
                sites = [s for s in sites if any(a <= at <= b for a, b, _ in s[2])] or sites
            framed = [s for s in sites if any(f.path == s[0] and f.function.rpartition(".")[2] == s[1].rpartition(".")[2] for f in frames)]
            chosen = framed or sites
            if len(chosen) != 1 or not framed and len(key) < ASSERT_LETTERS:
                continue
            path, function, spans = chosen[0]
            line = next((n for a, b, n in spans if at is not None and a <= at <= b), spans[-1][2])
            lines = span_lines(prepared, spans)
            raised = Raised("AssertionError", "", tuple(frames), source="assert " + " ".join(text.split()))
            return Finding(raised, (), "assert", assertion=Frame(path, line, function), lines=lines)
    return None


def foreign_frame(raised: Raised) -> Outside | None:
    """The traceback's last frame is in another installed library's code, at a line that makes a new exception
    (`raise X(...)`, an `assert` its AssertionError comes from, or any other line where Python's own TypeError,
    KeyError, ... came from): that library raised it, whatever the message looks like (transformers checks
    `rope_scaling` with the words vLLM once used). A library that passes on an error made elsewhere (pydantic's validation around vLLM's
    check, an HTTP client re-raising the server's answer) shows another line there."""
    last = raised.frames[-1] if raised.frames else None
    name = raised.type.rpartition(".")[2]
    made = (RAISE_NEW.match(raised.source) or name == "AssertionError" and ASSERT_LINE.match(raised.source)
            or name in PYTHON_RAISES and raised.source and not raised.source.startswith("raise"))
    if last and not last.path and last.library and made:
        return Outside("module", f"This is an error of {last.library}, raised outside vLLM.")
    return None


def find(prepared: Prepared, raised: Raised, version: str | None, top: int = 5) -> Finding:
    assertion = bare_assert(raised)
    if assertion:
        return Finding(raised, (), "assert", assertion=assertion, lines=assert_lines(prepared, raised.source, assertion))
    matches = score_entries(prepared, raised, version, top)
    raised_by = foreign_frame(raised)
    if raised_by:
        return Finding(raised, tuple(matches), "outside", raised_by)
    best = matches[0] if matches else None
    outside = outside_of(prepared, raised)
    # A vLLM message that merely resembles a foreign one ("CUDA out of memory occurred when warming up the
    # sampler ...") is vLLM's when its own literal text is all there and says much, or a frame pins it.
    vllms = best is not None and (best.frame_agrees and best.score >= CONFIDENT["high"] or best.how in EXACTLY
                                  and best.score >= CONFIDENT["high"] and best.information >= 2 * ENOUGH)
    if outside and not vllms:
        return Finding(raised, tuple(matches), "outside", outside)
    outside = foreign_module(raised)
    if outside and not (best and best.confidence != "low"):
        return Finding(raised, tuple(matches), "outside", outside)
    if best and best.confidence != "low":
        return Finding(raised, tuple(matches), "wrapper" if best.wrapper == WRAPPERS["points"] else "vllm")
    return Finding(raised, tuple(m for m in matches if m.how != "frame" and m.score > 0), "none")


def answer(index: dict | Prepared, paste: Paste, top: int = 5) -> Answer:
    """The root cause a paste shows, with the wrappers around it as context."""
    prepared = prepare(index) if isinstance(index, dict) else index
    findings: list[Finding] = []
    seen: dict[tuple, Finding] = {}
    for raised in paste.raised:
        key = (raised.type, raised.message, raised.frames[-1:] if raised.frames else ())
        finding = seen.get(key) or find(prepared, raised, paste.version, top)
        seen[key] = finding
        if finding.kind in ("vllm", "wrapper") and finding.matches[0].wrapper:
            # A wrapper that quotes the error it stands for ("Worker failed with error '...'", "Error in model
            # execution: <the caught one>"): that error, when it can be told, is the cause; the wrapper, context.
            for value in finding.matches[0].values.values():
                if any(f.raised.message.strip() == value.strip() for f in findings):
                    finding = replace(finding, kind="wrapper")  # the error it quotes was printed before it: that one
                elif len(words(value)) >= 3:
                    inner = find(prepared, Raised("", value), paste.version, top)
                    if inner.kind in ("vllm", "outside"):
                        findings.append(inner)
                        finding = replace(finding, kind="wrapper")
        findings.append(finding)
    if not findings or all(f.kind in ("none", "wrapper") for f in findings):
        # Nothing but wrappers and unknown errors: an assert the paste quotes without its frame may be the cause.
        quoted = indexed_assert(prepared, paste)
        if quoted:
            return Answer(quoted, tuple(_unique([f for f in findings if f.kind == "wrapper"])), paste.version)
    if not findings:
        return Answer(None, (), paste.version)
    root = next((k for k in range(len(findings) - 1, -1, -1) if findings[k].kind in ("vllm", "outside", "assert")), None)
    if root is None:
        root = next((k for k in range(len(findings) - 1, -1, -1) if findings[k].kind == "wrapper"), len(findings) - 1)
        # A wrapper pointing at an error printed before it that no vLLM error matches: that one is the cause.
        if findings[root].kind == "wrapper" and findings[root].matches[0].wrapper == WRAPPERS["points"]:
            root = next((k for k in range(root - 1, -1, -1) if findings[k].kind == "none" and findings[k].raised.type
                         and findings[k].raised.message.strip()), root)
    # The same error found twice (quoted in another exception's text, say): the better fit is the one to answer with.
    top = findings[root].matches[0] if findings[root].kind == "vllm" and findings[root].matches else None
    if top:
        root = max((k for k, f in enumerate(findings) if f.kind == "vllm" and f.matches and f.matches[0].id == top.id),
                   key=lambda k: (findings[k].matches[0].score, k))
    # A vLLM error that only resembles the message, after an error named outside vLLM (CUDA out of memory, then
    # "... died during start-up"): the named one is the cause, the other is what it brought down.
    if findings[root].kind == "vllm" and findings[root].matches[0].how not in EXACTLY:
        root = next((k for k in range(root - 1, -1, -1) if findings[k].kind == "outside"), root)
    # Raised while handling a vLLM error: that one is the cause.
    while root > 0 and findings[root].kind == "vllm" and findings[root].raised.chained and findings[root - 1].kind == "vllm":
        root -= 1
    context = [f for f in findings[root + 1 :] if f.kind == "wrapper" or f.kind == "vllm" and f.raised.chained]
    if root > 0 and findings[root - 1].kind != "none" and findings[root].raised.frames:
        context.insert(0, findings[root - 1])  # what it was raised while handling
    return Answer(findings[root], tuple(_unique(context)), paste.version)


def _unique(findings: list[Finding]) -> list[Finding]:
    out, seen = [], set()
    for f in findings:
        key = f.matches[0].id if f.matches else f.raised.message
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def rank(index: dict | Prepared, paste: Paste, top: int = 5) -> list[Match]:
    """The best matches for the root cause of a paste, best first; none when no vLLM error matches."""
    found = answer(index, paste, top).finding
    return list(found.matches) if found and found.kind in ("vllm", "wrapper") else []


# --- examples ----------------------------------------------------------------------------------------

_NUMERIC = re.compile(r"(len|size|num|count|dim|rank|idx|index|port|tokens|_id\b|step|batch|blocks|bytes|width|height|seq|world|heads|layers|max|min|limit|capacity)", re.I)


def plausible_value(name: str, salt: int = 0) -> str:
    """A value a placeholder might be filled with at run time, by what its expression is called."""
    low = name.lower()
    if "dtype" in low:
        return "torch.float16"
    if low.endswith(".shape") or "shape" in low:
        return f"torch.Size([{4 + salt}, 128])"
    if low.startswith("type(") or low.endswith("__name__") or low.endswith(".__class__"):
        return "LlamaForCausalLM"
    if "path" in low or "file" in low or "dir" in low:
        return f"/models/llama-{salt}/config.json"
    if _NUMERIC.search(low):
        return str(4096 + salt)
    if "model" in low or "name" in low:
        return f"meta-llama/Llama-3.1-{8 + salt}B"
    return f"value{salt}"


def example_message(parts: list, salt: int = 0) -> str:
    """The template filled with plausible values: what a user might paste."""
    return "".join(p if isinstance(p, str) else plausible_value(p[0], salt + k) for k, p in enumerate(parts))
