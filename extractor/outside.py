"""Errors from outside vLLM that users paste (PyTorch, CUDA, NCCL, Hugging Face): annotations/outside.yaml, checked and resolved."""

from __future__ import annotations

import re
from pathlib import Path

from .lookup import fold
from .model import ErrorRecord, OutsideError, UserError
from .notes import read_yaml

FIELDS = {"name", "type", "message", "says", "see"}


def load_outside(path: Path) -> tuple[dict, ...]:
    """The list as written; a malformed entry stops the build naming the file, the line and the fault."""
    name = f"{path.parent.name}/{path.name}"
    entries, node = read_yaml(path, name)
    if entries is None:
        return ()
    if not isinstance(entries, list):
        raise UserError(f"{name}:1: expected a list of entries, each '- name: ...' with says and a type or message pattern")
    for entry, entry_node in zip(entries, node.value):
        where = f"{name}:{entry_node.start_mark.line + 1}"
        if not isinstance(entry, dict) or not {"name", "says"} <= entry.keys() or not entry.keys() <= FIELDS:
            raise UserError(f"{where}: an entry needs name and says, and may have type, message and see (and nothing else)")
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
