"""Curated notes: what people wrote about an error, in annotations/<id>.md, and whether the code has moved on since."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from .model import Annotation, ErrorEntry, ExampleFix, UserError

_FRONT = re.compile(r"\A---[ \t]*\n(?P<yaml>.*?\n)---[ \t]*\n(?P<body>.*)\Z", re.S)
ID = re.compile(r"[0-9a-f]{16}")


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
    kind: Literal["user", "internal", "unknown"] | None = None
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


def parse_note(name: str, text: str) -> Note:
    """A note from its file's text; a malformed one raises UserError naming the file, the line and the fault."""
    stem = name.rsplit("/", 1)[-1].removesuffix(".md")
    if not ID.fullmatch(stem):
        raise UserError(f"{name}:1: a note's file name must be the error's 16-hex id, like 0123456789abcdef.md")
    match = _FRONT.match(text.replace("\r\n", "\n"))
    if not match:
        raise UserError(f"{name}:1: a note starts with YAML front matter between two '---' lines")
    try:
        data = yaml.safe_load(match.group("yaml"))
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 2 if mark is not None else 1
        raise UserError(f"{name}:{line}: invalid YAML: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(data, dict):
        raise UserError(f"{name}:2: the front matter must be a mapping of fields")
    try:
        front = _Front.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        key = str(first["loc"][0]) if first["loc"] else ""
        raise UserError(f"{name}:{_line_of(match.group('yaml'), key)}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None
    meaning = match.group("body").strip() or None
    fields = {
        "meaning": meaning,
        "triggers": tuple(front.triggers),
        "situations": tuple(front.situations),
        "solutions": tuple(front.solutions),
        "example_fix": ExampleFix(**front.example_fix.model_dump()) if front.example_fix else None,
    }
    sources = {key: "curated" for key, value in fields.items() if value}
    annotation = Annotation(**fields, kind=front.kind or "unknown", sources=sources)
    return Note(id=stem, file=name, code_hash=front.code_hash, annotation=annotation)


def _line_of(front: str, key: str) -> int:
    for number, line in enumerate(front.split("\n"), start=2):
        if key and line.startswith(f"{key}:"):
            return number
    return 2


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


def check_notes(notes: dict[str, Note], errors: dict[str, ErrorEntry]) -> NotesReport:
    stale = [n.file for n in notes.values() if n.id in errors and n.code_hash != code_hash(errors[n.id])]
    orphaned = [n.file for n in notes.values() if n.id not in errors]
    return NotesReport(stale=tuple(sorted(stale)), orphaned=tuple(sorted(orphaned)))
