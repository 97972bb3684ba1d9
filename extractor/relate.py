"""Related errors: the ones raised nearby in the code, or with a similar message."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Sequence

from .model import ErrorEntry

MAX_RELATED = 8
_WORD = re.compile(r"[a-z][a-z0-9_]{2,}")
_COMMON = frozenset("the and for not with are but must only when this that from has have should can".split())


def _folder(path: str, depth: int) -> str:
    return "/".join(path.split("/")[:depth])


def _words(error: ErrorEntry) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall((error.template or "").lower()) if w not in _COMMON)


def related_errors(errors: Sequence[ErrorEntry]) -> dict[str, tuple[str, ...]]:
    """Up to MAX_RELATED ids per error, ranked: same function, same file, same folder, same subsystem,
    each rank ordered by how many message words they share."""
    by_function: dict[tuple[str, str], set[str]] = defaultdict(set)
    by_file: dict[str, set[str]] = defaultdict(set)
    by_folder: dict[str, set[str]] = defaultdict(set)
    by_subsystem: dict[str, set[str]] = defaultdict(set)
    for error in errors:
        for site in error.sites:
            by_function[(site.path, site.function)].add(error.id)
            by_file[site.path].add(error.id)
            by_folder[_folder(site.path, -1)].add(error.id)
            by_subsystem[_folder(site.path, 3)].add(error.id)
    words = {e.id: _words(e) for e in errors}
    result: dict[str, tuple[str, ...]] = {}
    for error in errors:
        score: dict[str, float] = {}
        for site in error.sites:
            for weight, group in (
                (4.0, by_function[(site.path, site.function)]),
                (3.0, by_file[site.path]),
                (2.0, by_folder[_folder(site.path, -1)]),
                (1.0, by_subsystem[_folder(site.path, 3)]) if len(by_subsystem[_folder(site.path, 3)]) <= 400 else (0, ()),
            ):
                for other in group:
                    if other != error.id and score.get(other, 0) < weight:
                        score[other] = weight
        mine = words[error.id]
        if mine:
            for other in score:
                shared = len(mine & words[other])
                score[other] += shared / (len(mine) + 1)
        ranked = sorted(score, key=lambda other: (-score[other], other))
        result[error.id] = tuple(ranked[:MAX_RELATED])
    return result
