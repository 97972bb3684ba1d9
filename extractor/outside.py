"""Errors from outside vLLM that users paste (PyTorch, CUDA, NCCL, Hugging Face): annotations/outside.yaml, checked and resolved."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from .lookup import fold
from .model import ErrorRecord, OutsideError, UserError

FIELDS = {"name", "type", "message", "says", "see"}


def load_outside(path: Path) -> tuple[dict, ...]:
    """The list as written; a malformed entry stops the build naming the file, the entry and the fault."""
    try:
        entries = yaml.safe_load(path.read_text(encoding="utf-8")) or []
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path.name}: cannot read it: {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}: " if mark else ""
        raise UserError(f"{path.name}: {where}cannot read it: {getattr(e, 'problem', None) or e}") from None
    if not isinstance(entries, list):
        raise UserError(f"{path.name}: expected a list of entries")
    for n, entry in enumerate(entries, 1):
        where = f"{path.name}: entry {n}"
        if not isinstance(entry, dict) or not {"name", "says"} <= entry.keys() or not entry.keys() <= FIELDS:
            raise UserError(f"{where}: needs name and says, and may have type, message and see (and nothing else)")
        if not (entry.get("type") or entry.get("message")):
            raise UserError(f"{where} ({entry['name']}): give a type or a message pattern")
        for key in ("type", "message"):
            if entry.get(key) is not None:
                try:
                    re.compile(entry[key])
                except (re.error, TypeError) as e:
                    raise UserError(f"{where} ({entry['name']}): {key} is not a regular expression: {e}") from None
        if not isinstance(entry.get("see", []), list):
            raise UserError(f"{where} ({entry['name']}): see must be a list of message starts")
    return tuple(entries)


def resolve_outside(entries: tuple[dict, ...], records: tuple[ErrorRecord, ...]) -> tuple[OutsideError, ...]:
    """Each entry with its `see` message starts turned into the id of the error that begins so, a current one first."""
    current = sorted(records, key=lambda r: (r.history is not None and r.history.status != "current", r.id))
    out = []
    for entry in entries:
        see: list[str] = []
        for start in entry.get("see", []):
            want = fold(str(start))
            see += [r.id for r in current if r.template and fold(r.template).startswith(want) and r.id not in see][:1]
        out.append(OutsideError(entry["name"], entry.get("type") or "", entry.get("message") or "", fold(entry["says"]), tuple(see)))
    return tuple(out)
