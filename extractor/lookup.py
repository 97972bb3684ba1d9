"""Looking up a pasted error: the compact index, reading a paste (prefixes, tracebacks, wrappers), matching and ranking.

site/assets/lookup.js is the same algorithm for the site's box; tests/lookup/vectors.json keeps the two in step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .messages import parts_of_template
from .model import KnowledgeBase

INDEX_FORMAT = 1
MAX_STEPS = 5000  # matcher steps per template: a pathological paste gives up instead of hanging
MAX_PASTE = 200_000  # characters read from a paste; the end of a traceback is what matters
MAX_MESSAGE = 20_000  # characters of a message matched: no vLLM message is longer without its values

# Log prefixes, stripped repeatedly from the start of each line.
PREFIXES = [
    re.compile(r"^\s*\([A-Za-z_][\w-]*(?: [\w-]+)? pid=\d+\)\s?"),  # (EngineCore_DP0 pid=37512)
    re.compile(r"^\s*(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?\s+\[[^\]]*\]\s?"),
    re.compile(r"^\s*\[rank\d+\]:\s?"),
    re.compile(r"^\s*[\w.-]+-\d+\s+\|\s?"),  # docker compose: vllm-1  |
    re.compile(r"^\s*\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\s+(?:\|\s*)?"),  # timestamps
]
FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<func>\S+)')
EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Warning|Interrupt|Iteration))(?:: ?(?P<message>.*))?$")
CHAIN = re.compile(r"^(?:During handling of the above exception, another exception occurred:|The above exception was the direct cause of the following exception:)\s*$")
PYDANTIC = re.compile(r"(?:Value|Assertion) error, (?P<message>.*?)(?: \[type=[\w_]+, input_value=.*)?$", re.S)
VALIDATION_SUFFIX = re.compile(r" \(parameter=[^,()]*, value=.*\)$", re.S)
VERSION = re.compile(r"\bvllm(?: version)?[ =:/_-]*v?(\d+\.\d+\.\d+)", re.I)
_SPACE = re.compile(r"\s+")


def fold(text: str) -> str:
    return _SPACE.sub(" ", text).strip()


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


def build_index(kb: KnowledgeBase) -> dict:
    """The compact index the site's box and the CLI share: per error its id, type, message parts and sites."""
    errors = []
    for record in kb.records:
        errors.append(
            {
                "i": record.id,
                "t": exception_names(record.exception),
                "p": index_parts(record.template),
                "s": index_sites(record),
                "n": record.title,
            }
        )
    snap = kb.snapshot
    return {"format": INDEX_FORMAT, "release": snap.version or snap.ref, "commit": snap.upstream_commit, "errors": errors}


# --- reading a paste --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Frame:
    path: str  # inside the vllm package: "vllm/config/model.py"; "" for frames outside vLLM
    line: int
    function: str


@dataclass(frozen=True)
class Raised:
    type: str  # as pasted: "ValueError", "vllm.exceptions.VLLMValidationError", "" when only a message was pasted
    message: str
    frames: tuple[Frame, ...] = ()


@dataclass(frozen=True)
class Paste:
    raised: tuple[Raised, ...]  # in the order they were raised: causes first
    version: str | None = None  # a vLLM version the paste mentions


def strip_prefixes(line: str) -> str:
    changed = True
    while changed:
        changed = False
        for prefix in PREFIXES:
            stripped = prefix.sub("", line, count=1)
            if stripped != line:
                line, changed = stripped, True
    return line


def vllm_path(file: str) -> str:
    """`/usr/lib/python3/site-packages/vllm/config/model.py` -> `vllm/config/model.py`."""
    at = file.replace("\\", "/").rfind("/vllm/")
    return file.replace("\\", "/")[at + 1 :] if at >= 0 else ""


def read_paste(text: str) -> Paste:
    """The exceptions a paste shows, causes first, each with its message and the frames above it."""
    lines = [strip_prefixes(line.rstrip("\r")) for line in text[-MAX_PASTE:].split("\n")]
    version = next((m.group(1) for line in lines for m in [VERSION.search(line)] if m), None)
    raised: list[Raised] = []
    frames: list[Frame] = []
    # an exception line after the last frame ends the paste; found once, not per line
    last_frame = max((k for k, line in enumerate(lines) if FRAME.match(line)), default=-1)
    i = 0
    while i < len(lines):
        line = lines[i]
        frame = FRAME.match(line)
        if frame:
            number = frame.group("line")
            frames.append(Frame(vllm_path(frame.group("file")), int(number) if len(number) <= 18 else 0, frame.group("func")))
            i += 1
            continue
        exc = EXCEPTION.match(line.strip())
        if exc and (frames or not raised or i == len(lines) - 1 or i > last_frame):
            message = [exc.group("message") or ""]
            j = i + 1
            while j < len(lines) and lines[j].strip() and not FRAME.match(lines[j]) and not CHAIN.match(lines[j].strip()) and not lines[j].startswith("Traceback"):
                message.append(lines[j].strip())
                j += 1
            raised.append(Raised(exc.group("type"), unwrap("\n".join(message)), tuple(frames)))
            frames = []
            i = j
            continue
        i += 1
    if not raised:
        body = [line for line in lines if line.strip() and not FRAME.match(line) and not line.startswith("Traceback")]
        raised.append(Raised("", unwrap("\n".join(body)), tuple(frames)))
    return Paste(tuple(raised), version)


def unwrap(message: str) -> str:
    """The message vLLM raised, out of pydantic's report and without VLLMValidationError's suffix."""
    pydantic = PYDANTIC.search(message)
    if pydantic and "validation error" in message[: pydantic.start() + 40].lower() or message.startswith(("Value error, ", "Assertion error, ")):
        message = pydantic.group("message") if pydantic else message
    message = fold(message)
    if message.endswith(")"):  # the regex backtracks from every " (parameter=": only try it where it can end
        message = VALIDATION_SUFFIX.sub("", message)
    return message


# --- matching ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    id: str
    title: str
    score: float
    how: str  # "full", "truncated", "frame", "similar"
    values: dict[str, str] = field(default_factory=dict)  # placeholder -> the text that filled it
    literal: int = 0  # literal characters that matched
    type_agrees: bool | None = None
    frame_agrees: bool = False

    @property
    def confidence(self) -> str:
        if self.frame_agrees or (self.how == "full" and self.type_agrees is not False and self.literal >= 12):
            return "high"
        if self.how in ("full", "truncated") and self.literal >= 8:
            return "medium"
        return "low"


def match_parts(parts: list, text: str, literals: list | None = None) -> tuple[str, int, dict[str, str]] | None:
    """Match a message against template parts: ("full" or "truncated", literal characters, values) or None.

    Literal text must appear in order (white space folded); each placeholder takes the
    shortest text that lets the rest match. A message cut short may end inside any part.
    """
    literals = literals or folded_literals(parts)
    steps = [0]

    def at(pi: int, ti: int, values: dict) -> tuple[str, int, dict] | None:
        steps[0] += 1
        if steps[0] > MAX_STEPS:
            return None
        if pi == len(parts):
            return ("full", 0, values) if ti == len(text) else None
        lit = literals[pi]
        if lit is not None:
            if text.startswith(lit, ti):
                rest = at(pi + 1, ti + len(lit), values)
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
        while j >= 0:
            found = at(pi + 1, j, {**values, name: text[ti:j]})
            if found:
                return found
            j = text.find(nxt, j + 1) if nxt is not None else -1  # two placeholders meet: one split is enough
        if ti < len(text):
            return ("truncated", 0, {**values, name: text[ti:]})
        return None

    if not parts:
        return None
    return at(0, 0, {})


def folded_literals(parts: list) -> list:
    """Each literal part with white space folded, keeping one space where it meets a placeholder."""
    literals: list = []
    for k, p in enumerate(parts):
        if not isinstance(p, str):
            literals.append(None)
            continue
        lead = " " if p[:1].isspace() and k > 0 else ""
        trail = " " if p[-1:].isspace() and k < len(parts) - 1 else ""
        literals.append(lead + fold(p) + trail if fold(p) else (" " if p else ""))
    return literals


@dataclass(frozen=True)
class Entry:
    """One error of the index, prepared once for matching many pastes."""

    id: str
    types: tuple[str, ...]
    parts: list
    literals: list
    head: str  # the first literal's start (prefix test), or the literal after a leading placeholder (contains test)
    anchored: bool  # whether the template starts with literal text
    sites: tuple
    title: str


def prepare(index: dict) -> list[Entry]:
    entries = []
    for error in index["errors"]:
        parts = error["p"]
        literals = folded_literals(parts)
        anchored = bool(parts) and isinstance(parts[0], str)
        head = fold(parts[0])[:16] if anchored else next((fold(p)[:16] for p in parts if isinstance(p, str) and fold(p)), "")
        entries.append(Entry(error["i"], tuple(error["t"]), parts, literals, head, anchored, tuple(map(tuple, error["s"])), error["n"]))
    return entries


def could_match(entry: Entry, text: str) -> bool:
    """A cheap test before matching: the message starts like the template's first literal text
    (or, when the template starts with a placeholder, contains the literal that follows it)."""
    if entry.anchored:
        return text.startswith(entry.head) or entry.head.startswith(text)
    return not entry.head or entry.head in text


def rank(index: dict | list[Entry], paste: Paste, top: int = 5) -> list[Match]:
    """The best matches for the last exception in the paste that vLLM raised, best first.
    Give the index `prepare`d when looking up many pastes."""
    entries = prepare(index) if isinstance(index, dict) else index
    candidates: list[Match] = []
    for raised in reversed(paste.raised):
        candidates = _rank_one(entries, raised, top)
        if candidates and candidates[0].how != "similar":
            return candidates
    return candidates


def _rank_one(entries: list[Entry], raised: Raised, top: int) -> list[Match]:
    text = fold(raised.message)[:MAX_MESSAGE]
    pasted_type = raised.type.rpartition(".")[2]
    if pasted_type == "ValidationError":
        pasted_type = "ValueError"  # pydantic wraps the ValueError a validator raised
    vllm_frames = [f for f in raised.frames if f.path]
    last = vllm_frames[-1] if vllm_frames else None
    found: list[Match] = []
    for entry in entries:
        frame_agrees = bool(last and any(s[0] == last.path and (s[1] == last.line or s[2] == last.function) for s in entry.sites))
        result = match_parts(entry.parts, text, entry.literals) if entry.parts and text and could_match(entry, text) else None
        if result is None and not frame_agrees:
            continue
        exact_frame = bool(last and any(s[0] == last.path and s[1] == last.line for s in entry.sites))
        type_agrees = (pasted_type in entry.types) if pasted_type and entry.types else None
        how, literal, values = result if result else ("frame", 0, {})
        score = literal * (1.0 if how == "full" else 0.8)
        score += {True: 30, False: -30, None: 0}[type_agrees]
        score += 200 if exact_frame else 100 if frame_agrees else 0
        found.append(Match(entry.id, entry.title, round(score, 2), how, values, literal, type_agrees, frame_agrees))
    found.sort(key=lambda m: (-m.score, m.id))
    if found:
        return found[:top]
    return _similar(entries, text, top)


def _similar(entries: list[Entry], text: str, top: int) -> list[Match]:
    """No template matches: the errors sharing the most words with the paste, as candidates."""
    words = set(re.findall(r"[a-z_][a-z0-9_]{2,}", text.lower()))
    if not words:
        return []
    scored = []
    for entry in entries:
        mine = set(re.findall(r"[a-z_][a-z0-9_]{2,}", " ".join(p for p in entry.parts if isinstance(p, str)).lower()))
        if mine:
            shared = len(words & mine) / len(mine | words)
            if shared > 0.1:
                scored.append(Match(entry.id, entry.title, round(shared * 10, 2), "similar"))
    scored.sort(key=lambda m: (-m.score, m.id))
    return scored[:top]


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
