"""Errors across releases: the lineage between consecutive catalogs, each error's history, and release notes.

An error's id is its (exception, template): a reworded message is a new id. Between two
releases an id is unchanged, moved (same id, other sites), new or removed; a removed id and
a new one raised in the same function with a similar message are one error reworded.
"""

from __future__ import annotations

import difflib
from dataclasses import replace
from typing import Sequence

from .facts import assert_sites
from .knowledge import title_of
from .messages import parts_of_template
from .model import Appearance, Catalog, ErrorEntry, ErrorHistory, History, ReleaseNotes, SiteRef, Snapshot

# How alike two titles must be to call a removed error and a new one the same error reworded:
# in the same function, or in a function of the same name in another file.
SAME_FUNCTION_SIMILARITY = 0.5
MOVED_FUNCTION_SIMILARITY = 0.8


def site_refs(error: ErrorEntry) -> tuple[SiteRef, ...]:
    return tuple(SiteRef(s.path, s.line, s.end_line, s.function) for s in error.sites)


def rewordings(old: dict[str, ErrorEntry], new: dict[str, ErrorEntry]) -> tuple[tuple[str, str], ...]:
    """Pairs (old id, new id) of errors gone and errors new that are one error reworded, best matches first."""
    titles = {i: _shape(e) for errors in (old, new) for i, e in errors.items()}
    pairs: list[tuple[str, str]] = []
    taken_old: set[str] = set()
    taken_new: set[str] = set()
    for key, threshold in ((_function_key, SAME_FUNCTION_SIMILARITY), (_function_name_key, MOVED_FUNCTION_SIMILARITY)):
        candidates = []
        by_key: dict[tuple, list[str]] = {}
        for i, e in new.items():
            if i not in taken_new:
                for k in {key(s) for s in e.sites}:
                    by_key.setdefault(k, []).append(i)
        for i, e in old.items():
            if i in taken_old:
                continue
            seen = {j for k in {key(s) for s in e.sites} for j in by_key.get(k, ())}
            for j in seen:
                score = difflib.SequenceMatcher(None, titles[i], titles[j], autojunk=False).ratio()
                if score >= threshold:
                    candidates.append((-score, i, j))
        for _, i, j in sorted(candidates):
            if i not in taken_old and j not in taken_new:
                taken_old.add(i)
                taken_new.add(j)
                pairs.append((i, j))
    return tuple(sorted(pairs))


def _shape(error: ErrorEntry) -> str:
    """What two wordings of one error are compared by: the title with each placeholder as `{}`, so that a placeholder
    whose expression grew (`{finished}` to `{finished}{(", also " + x) if x else ""}`) does not hide that the words
    are the same."""
    if not error.template:
        return title_of(error)
    return title_of(error).split(":", 1)[0] + ": " + "".join("{}" if hole else text for hole, text in parts_of_template(error.template))


def _function_key(site) -> tuple[str, str]:
    return site.path, site.function


def _function_name_key(site) -> tuple[str, str]:
    return site.function.rpartition(".")[2], site.exception.qualname


def _where(error: ErrorEntry) -> tuple[str, int]:
    return error.sites[0].path, error.sites[0].line


def release_notes(old: Catalog | None, new: Catalog) -> ReleaseNotes:
    """What changed from `old` to `new`; for the first release of a history (`old` None), its errors only."""
    now = {e.id: e for e in new.errors}
    if old is None:
        return ReleaseNotes(new.snapshot.ref, new.snapshot.date, None, len(now), (), (), (), (), (), (), len(now))
    before = {e.id: e for e in old.errors}
    gone = {i: before[i] for i in sorted(before.keys() - now.keys())}
    appeared = {i: now[i] for i in sorted(now.keys() - before.keys())}
    reworded = rewordings(gone, appeared)
    moved = tuple(i for i in sorted(before.keys() & now.keys()) if site_refs(before[i]) != site_refs(now[i]))
    return ReleaseNotes(
        ref=new.snapshot.ref,
        date=new.snapshot.date,
        previous=old.snapshot.ref,
        errors=len(now),
        new=tuple(appeared),
        gone=tuple(gone),
        added=tuple(sorted((i for i in appeared if i not in {n for _, n in reworded}), key=lambda i: _where(appeared[i]))),
        removed=tuple(sorted((i for i in gone if i not in {o for o, _ in reworded}), key=lambda i: _where(gone[i]))),
        reworded=tuple(sorted(reworded, key=lambda pair: _where(appeared[pair[1]]))),
        moved=moved,
        unchanged=len(before.keys() & now.keys()) - len(moved),
    )


def build_history(catalogs: Sequence[Catalog]) -> History:
    """The history of every error of `catalogs`, given oldest first."""
    notes = tuple(release_notes(old, new) for old, new in zip([None, *catalogs[:-1]], catalogs))
    appearances: dict[str, list[Appearance]] = {}
    for catalog in catalogs:
        for e in catalog.errors:
            appearances.setdefault(e.id, []).append(Appearance(catalog.snapshot.ref, catalog.snapshot.upstream_commit, site_refs(e)))
    refs = tuple(c.snapshot.ref for c in catalogs)
    newest = {e.id for e in catalogs[-1].errors}
    successor: dict[str, tuple[str, str]] = {}  # old id -> (the release that reworded it, the new id)
    supersedes: dict[str, list[str]] = {}
    for n in notes:
        for o, new in n.reworded:
            successor[o] = (n.ref, new)
            supersedes.setdefault(new, []).append(o)
    errors = {}
    for i, seen in sorted(appearances.items()):
        last = refs.index(seen[-1].ref)
        removed_in = refs[last + 1] if i not in newest else None
        replaced = successor.get(i)
        errors[i] = ErrorHistory(
            releases=tuple(seen),
            status="current" if i in newest else "removed",
            removed_in=removed_in,
            superseded_by=replaced[1] if replaced and replaced[0] == removed_in else None,
            supersedes=tuple(sorted(supersedes.get(i, ()))),
        )
    return History(refs=refs, notes=notes, errors=errors, asserts=assert_sites(catalogs))


def covering_catalog(catalogs: Sequence[Catalog]) -> tuple[Catalog, dict[str, Snapshot]]:
    """The newest catalog plus every error of the older ones that it lacks, each as its last release had it.

    Returns the catalog and, for each error not in the newest release, the snapshot of the
    release its entry comes from (for its permalinks and code).
    """
    newest = catalogs[-1]
    entries = {e.id: e for e in newest.errors}
    snapshots: dict[str, Snapshot] = {}
    for catalog in reversed(catalogs[:-1]):
        for e in catalog.errors:
            if e.id not in entries:
                entries[e.id] = e
                snapshots[e.id] = catalog.snapshot
    classes = {c.qualname: c for catalog in catalogs for c in catalog.exception_classes}
    return replace(newest, errors=tuple(entries[i] for i in sorted(entries)), exception_classes=tuple(classes[q] for q in sorted(classes))), snapshots
