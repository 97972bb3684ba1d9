"""Curated notes (annotations/<id>.md: what people wrote about an error, and whether the code has moved on since)
and the glossary, read strictly because anyone may send them: a fault names its file and line, Markdown is made safe."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from .lineage import earlier_wordings
from .markup import safe_markdown
from .model import Annotation, ErrorEntry, ErrorHistory, ExampleFix, GlossaryTerm, Kind, UserError

_FRONT = re.compile(r"\A---[ \t]*\n(?P<yaml>(?:.*?\n)??)---[ \t]*(?:\n(?P<body>.*))?\Z", re.S)
ID = re.compile(r"[0-9a-f]{16}")
_NOTE_FIELDS = "error, code_hash, kind, triggers, situations, solutions, example_fix"


class _Fix(BaseModel):
    model_config = ConfigDict(extra="forbid")
    before: str
    after: str
    language: str = "shell"


class _Front(BaseModel):
    """The fields a note may set; anything else is a mistake worth failing the build for."""

    model_config = ConfigDict(extra="forbid")
    error: str  # the error's title, for people reading the file
    code_hash: str
    kind: Kind | None = None
    triggers: list[str] = []
    situations: list[str] = []
    solutions: list[str] = []
    example_fix: _Fix | None = None

    @field_validator("triggers", "situations", "solutions")
    @classmethod
    def _no_empty_items(cls, items: list[str]) -> list[str]:
        if any(not item.strip() for item in items):
            raise ValueError("has an empty item")
        return items


@dataclass(frozen=True)
class Note:
    id: str
    file: str  # as named in messages: annotations/<id>.md
    code_hash: str
    annotation: Annotation


def code_hash(error: ErrorEntry) -> str:
    """What a note is written against: the message and, per site, the function and its guard; not line numbers."""
    digest = hashlib.sha256()
    digest.update(f"{error.exception}\x1f{error.template}\x1f".encode())
    for site in sorted(error.sites, key=lambda s: (s.path, s.function)):
        guard = "\x1e".join(f"{c.kind}:{c.holds}:{' '.join(c.code.split())}" for c in site.guard)
        digest.update(f"{site.path}\x1f{site.function}\x1f{guard}\x1d".encode())
    return digest.hexdigest()[:12]


def read_annotation(path: Path, name: str) -> bytes:
    """A curated file's bytes; one that cannot be read raises UserError naming it (as `name`) and what to do."""
    try:
        return path.read_bytes()
    except IsADirectoryError:
        raise UserError(f"{name}: is a directory, not a file: rename or remove it (annotations/ holds files only)") from None
    except OSError as e:
        raise UserError(f"{name}: cannot read it: {e.strerror or e}: check that it is a readable file") from None


def parse_note(name: str, text: str | bytes) -> Note:
    """A note from its file's text; a malformed one raises UserError naming the file, the line and the fault."""
    stem = name.rsplit("/", 1)[-1].removesuffix(".md")
    if not ID.fullmatch(stem):
        raise UserError(f"{name}:1: a note's file name must be the error's 16-hex id, like 0123456789abcdef.md")
    match = _FRONT.match(_decode(name, text))
    if not match:
        raise UserError(f"{name}:1: a note starts with YAML front matter between two '---' lines")
    data, node = _load_yaml(name, match.group("yaml"), first_line=2)
    if data is None:
        raise UserError(f"{name}:2: the front matter is empty: give at least error: and code_hash: ('vllm-errors note <id>' writes them)")
    if not isinstance(data, dict):
        raise UserError(f"{name}:{_line(node, (), 2)}: the front matter must be a mapping of fields ({_NOTE_FIELDS})")
    try:
        front = _Front.model_validate(data)
    except ValidationError as e:
        raise UserError(_invalid(name, node, 2, e, _NOTE_FIELDS)) from None
    body = match.group("body") or ""
    body_line = match.group("yaml").count("\n") + 3 + body[: len(body) - len(body.lstrip())].count("\n")
    meaning = _safe(name, body_line, "meaning", body.strip()) or None
    lists = {}
    for field in ("triggers", "situations", "solutions"):
        items = (_safe(name, _line(node, (field, i), 2), f"{field}.{i}", item) for i, item in enumerate(getattr(front, field)))
        lists[field] = tuple(item for item in items if item.strip())  # an item of nothing but HTML may be left empty
    fields = {
        "meaning": meaning,
        **lists,
        "example_fix": ExampleFix(**front.example_fix.model_dump()) if front.example_fix else None,
    }
    # A field the note writes owns the page's field, even empty (`situations: []`, `example_fix: null`): the writer
    # found none worth saying, and derived text must not fill the gap they left on purpose. Left out, it is filled.
    sources = {key: "curated" for key, value in fields.items() if value or key in front.model_fields_set}
    if "kind" in front.model_fields_set:  # `kind: unknown` written is a judgement (a wrapper of any cause), not a gap
        sources["kind"] = "curated"
    annotation = Annotation(**fields, kind=front.kind or "unknown", sources=sources)
    return Note(id=stem, file=name, code_hash=front.code_hash, annotation=annotation)


def _safe(name: str, line: int, field: str, markdown: str) -> str:
    try:
        return safe_markdown(markdown)
    except ValueError as e:
        raise UserError(f"{name}:{line}: {field}: {e}") from None


class _Term(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    term: str
    pattern: str  # matched case-insensitively, as knowledge.glossary_terms does
    definition: str

    @field_validator("term", "pattern", "definition")
    @classmethod
    def _not_empty(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("is empty")
        return text

    @field_validator("pattern")
    @classmethod
    def _a_pattern(cls, pattern: str) -> str:
        try:
            compiled = re.compile(pattern, re.I)
        except re.error as e:
            raise ValueError(f"not a regular expression ({e}): escape special characters such as ( with a backslash") from None
        if compiled.search(""):
            raise ValueError("matches empty text, so it would match every error: make it match the term itself")
        return pattern


_TERM_FIELDS = "term, pattern, definition"


def parse_glossary(name: str, text: str | bytes) -> tuple[GlossaryTerm, ...]:
    """The glossary's entries; a malformed one raises UserError naming the file, the line and the fault."""
    entries, node = _load_yaml(name, _decode(name, text), first_line=1)
    if entries is None:
        return ()
    if not isinstance(entries, list):
        raise UserError(f"{name}:{_line(node, (), 1)}: the glossary must be a list of entries, each '- term: ...' with pattern and definition")
    terms: list[GlossaryTerm] = []
    first_seen: dict[str, int] = {}
    for entry, entry_node in zip(entries, node.value):
        line = _line(entry_node, (), 1)
        if not isinstance(entry, dict):
            raise UserError(f"{name}:{line}: an entry must be a mapping with {_TERM_FIELDS}, like '- term: MLA'")
        try:
            term = _Term.model_validate(entry)
        except ValidationError as e:
            raise UserError(_invalid(name, entry_node, 1, e, _TERM_FIELDS)) from None
        if term.term.casefold() in first_seen:
            raise UserError(f"{name}:{line}: the term {term.term!r} is defined already at line {first_seen[term.term.casefold()]}: keep one entry")
        first_seen[term.term.casefold()] = line
        definition = _safe(name, _line(entry_node, ("definition",), 1), "definition", term.definition)
        terms.append(GlossaryTerm(term=term.term, pattern=term.pattern, definition=definition))
    return tuple(terms)


# --- reading YAML with its lines, strictly -------------------------------------------------------


class _DuplicateKey(yaml.constructor.ConstructorError):
    pass


class _StrictLoader(yaml.SafeLoader):
    """Safe YAML that refuses a key given twice, where YAML itself lets the last one win without a word."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                if key in seen:
                    raise _DuplicateKey(None, None, f"duplicate key {key!r}", key_node.start_mark)
                seen.add(key)
            except TypeError:  # unhashable: the base class says so, with its line
                pass
        return super().construct_mapping(node, deep=deep)


def _load_yaml(name: str, text: str, first_line: int) -> tuple[object, yaml.Node | None]:
    """The data and its node tree (for line numbers); `text` starts at line `first_line` of the file named `name`."""
    try:
        loader = _StrictLoader(text)  # checks the characters already
        try:
            node = loader.get_single_node()
            return (loader.construct_document(node) if node is not None else None), node
        finally:
            loader.dispose()
    except _DuplicateKey as e:
        raise UserError(f"{name}:{e.problem_mark.line + first_line}: {e.problem}: give each key once") from None
    except yaml.reader.ReaderError as e:
        line = text[: e.position].count("\n") + first_line
        raise UserError(f"{name}:{line}: character U+{e.character:04X} is not allowed in YAML: remove it") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + first_line if mark is not None else first_line
        raise UserError(f"{name}:{line}: invalid YAML: {getattr(e, 'problem', None) or e}") from None
    except RecursionError:
        raise UserError(f"{name}:{first_line}: invalid YAML: nested too deeply") from None


def read_yaml(path: Path, name: str) -> tuple[object, yaml.Node | None]:
    """A curated YAML file's data and node tree, read strictly; any fault is a UserError naming `name` and the line."""
    return _load_yaml(name, _decode(name, read_annotation(path, name)), first_line=1)


def _decode(name: str, data: str | bytes) -> str:
    """A curated file's text, with \n line ends."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            line = data[: e.start].count(b"\n") + 1
            raise UserError(f"{name}:{line}: byte 0x{data[e.start]:02x} is not UTF-8: save the file as UTF-8") from None
    return data.replace("\r\n", "\n")


def _line(node: yaml.Node | None, loc: tuple, first_line: int) -> int:
    """The file line of the node at a validation error's location: the deepest part of it that exists."""
    if node is None:
        return first_line
    line = node.start_mark.line
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            pair = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)), None)
            if pair is None:
                break
            line, node = pair[0].start_mark.line, pair[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line
        else:
            break
    return line + first_line


_HINTS = {"missing": "add it", "extra_forbidden": "the fields are {fields}", "string_type": "write it as text"}


def _invalid(name: str, node: yaml.Node | None, first_line: int, error: ValidationError, fields: str) -> str:
    first = error.errors()[0]
    where = ".".join(map(str, first["loc"]))
    hint = _HINTS.get(first["type"])
    return f"{name}:{_line(node, first['loc'], first_line)}: {where}: {first['msg']}" + (f": {hint.format(fields=fields)}" if hint else "")


def render_note(error: ErrorEntry, title: str, derived: Annotation) -> str:
    """A new note for an error, pre-filled from the derived annotation, for a person to edit."""
    front = {
        "error": title,
        "code_hash": code_hash(error),
        "kind": derived.kind if derived.kind != "unknown" else None,
        "triggers": list(derived.triggers),
        "situations": [],
        "solutions": list(derived.solutions),
    }
    if derived.example_fix:
        front["example_fix"] = {"before": derived.example_fix.before, "after": derived.example_fix.after, "language": derived.example_fix.language}
    front = {k: v for k, v in front.items() if v is not None}
    body = derived.meaning or ""
    return "---\n" + yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100) + "---\n" + body + "\n"


@dataclass(frozen=True)
class NotesReport:
    stale: tuple[str, ...]  # files whose code has changed since they were written
    orphaned: tuple[str, ...]  # files whose error is gone from this release
    unknown_settings: tuple[str, ...] = ()  # "file: --flag, VLLM_VAR": levers a note names that this release lacks
    reporting: tuple[str, ...] = ()  # files with a solution that says to report the error: no lever, and the page of
    # an internal error has its own "Report this to vLLM" section


def follow_rewordings(notes: dict[str, Note], history: dict[str, ErrorHistory]) -> dict[str, Note]:
    """The notes, and for each error reworded from one with a note (a new id, `supersedes` in its history) and with no
    note of its own, that note: written against the old code, it is flagged stale on the new error's page and by the
    report, rather than lost."""
    found = dict(notes)
    for error_id in sorted(history.keys() - notes.keys()):
        old = next((i for i in earlier_wordings(error_id, history) if i in notes), None)
        if old:
            found[error_id] = replace(notes[old], id=error_id)
    return found


def curated_annotator(notes: dict[str, Note], errors: dict[str, ErrorEntry]):
    """Each note's annotation, flagged stale when its error's code no longer matches the hash it was written against."""

    def annotate(error: ErrorEntry) -> Annotation:
        note = notes.get(error.id)
        if note is None:
            return Annotation()
        if note.code_hash != code_hash(error):
            return Annotation(**{**note.annotation.__dict__, "stale": True})
        return note.annotation

    return annotate


_REPORT_IT = re.compile(r"\breport (it|this|the (error|bug))\b|\b(open|file) an issue\b", re.I)
_CODE_SPAN = re.compile(r"`+([^`]+)`+")
_ENV_VAR = re.compile(r"\bVLLM_[A-Z0-9_]*[A-Z0-9]\b")


def named_settings(annotation: Annotation) -> tuple[set[str], set[str]]:
    """The `vllm serve` flags and the VLLM_ environment variables a note's text names: a code span that starts with a
    flag (`--max-model-len 8192`) or is a `vllm serve` command, and the shell example fix's command; flags with
    underscores are spelled with dashes, as vLLM's parser reads them."""
    texts = [annotation.meaning or "", *annotation.triggers, *annotation.situations, *annotation.solutions]
    commands = [span.strip() for text in texts for span in _CODE_SPAN.findall(text)]
    fix = annotation.example_fix
    if fix and fix.language == "shell":
        commands += [fix.before, fix.after]
    flags = set()
    for command in commands:
        words = command.split()
        if command.startswith("--") or words[:2] == ["vllm", "serve"]:
            flags |= {w.split("=")[0].replace("_", "-") for w in words if re.fullmatch(r"--[a-z][a-z0-9_-]*(=.*)?", w)}
    env = {m for text in texts + ([fix.before, fix.after] if fix else []) for m in _ENV_VAR.findall(text)}
    return flags, env


def unknown_settings(notes: dict[str, Note], errors: dict[str, ErrorEntry], flags: set[str], env_vars: set[str]) -> list[str]:
    """Per note of an error of this release, the flags and VLLM_ variables it names that the release does not declare
    (`--no-x` counts as `--x`): a lever that is gone or never was is the first thing a note gets wrong."""
    found = []
    for note in notes.values():
        if note.id not in errors:
            continue
        named_flags, named_env = named_settings(note.annotation)
        missing = sorted(f for f in named_flags if f not in flags and "--" + f.removeprefix("--no-") not in flags)
        missing += sorted(named_env - env_vars)
        if missing:
            found.append(f"{note.file}: {', '.join(missing)}")
    return sorted(found)


def check_notes(notes: dict[str, Note], errors: dict[str, ErrorEntry], flags: set[str] | None = None,
                env_vars: set[str] | None = None) -> NotesReport:
    """Stale and orphaned notes; with the release's flags and environment variables (none known: not checked), the
    notes that name settings it does not declare."""
    stale = [n.file if Path(n.file).stem == n.id else
             f"{n.file} (its error was reworded into {n.id}: rename it {Path(n.file).with_name(n.id + '.md').as_posix()})"
             for n in notes.values() if n.id in errors and n.code_hash != code_hash(errors[n.id])]
    orphaned = [n.file for n in notes.values() if n.id not in errors]
    unknown = unknown_settings(notes, errors, flags, env_vars or set()) if flags else []
    reporting = [n.file for n in notes.values() if n.id in errors and any(_REPORT_IT.search(x) for x in n.annotation.solutions)]
    return NotesReport(stale=tuple(sorted(stale)), orphaned=tuple(sorted(orphaned)), unknown_settings=tuple(unknown),
                       reporting=tuple(sorted(reporting)))
