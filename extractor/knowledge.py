"""The knowledge base: each error of a catalog with its title, subsystem, class hierarchy, annotation and related errors."""

from __future__ import annotations

import re
from typing import Callable

from .catalog import hierarchy
from .facts import assert_sites
from .messages import parts_of_template, shown_template
from .model import Annotation, Catalog, ErrorEntry, ErrorRecord, GlossaryTerm, History, KnowledgeBase, Report, Snapshot
from .lineage import counted_later
from .relate import related_errors
from .reports import MAX_ROOT_CAUSES, root_causes

Annotator = Callable[[ErrorEntry], Annotation]


def subsystem_of(path: str) -> str:
    """`vllm/distributed/kv_transfer/x/y.py` -> `distributed/kv_transfer`; `vllm/envs.py` -> `vllm`."""
    folders = path.split("/")[1:-1]
    return "/".join(folders[:2]) or "vllm"


def current_first(error_id: str, related: tuple[str, ...], history: History) -> tuple[str, ...]:
    """The related errors a page lists: for an error of the newest release, those of the newest release when it
    has any (a removed one is there for pages of removed errors, and for errors nothing current relates to)."""
    def current(i: str) -> bool:
        h = history.errors.get(i)
        return h is None or h.status == "current"

    if not current(error_id):
        return related
    return tuple(i for i in related if current(i)) or related


def short_name(qualname: str) -> str:
    return " | ".join(part.strip().rpartition(".")[2] for part in qualname.split("|")) if qualname else ""


def title_of(error: ErrorEntry) -> str:
    name = short_name(error.exception) or error.sites[0].exception.written
    if error.template:
        return f"{name}: {' '.join(shown_template(error.template).split())}"
    site = error.sites[0]
    what = {"reraise": "re-raised", "empty": "raised with no message"}.get(site.message.form, "with a computed message")
    return f"{name} {what} in {site.function}"


def page_url(error_id: str) -> str:
    return f"errors/{error_id}.html"


MAX_TERMS = 4


def glossary_terms(error: ErrorEntry, glossary: tuple[GlossaryTerm, ...]) -> tuple[GlossaryTerm, ...]:
    """The glossary entries whose pattern occurs in the message, the guard, the path or the function."""
    site = error.sites[0]
    text = " ".join([error.template or "", *(c.code for c in site.guard), site.path, site.function])
    return tuple(term for term in glossary if re.search(term.pattern, text, re.I))[:MAX_TERMS]


_POINTS_ELSEWHERE = re.compile(
    r"\b(?:root cause|stack ?trace|traceback|error|logs?|see)\b[^.]{0,20}\babove\b|\(above\)|\broot cause\b"
    r"|\bcheck the (?:logs?|stack ?trace)|\bsee (?:the )?(?:logs?|stack ?trace)",
    re.I,
)


_CAUGHT = re.compile(r"(?:str|repr)?\(?(?:e|err|exc|error|ex|exception|cause)\)?(?:!r|!s)?")


def wrapper_kind(error: ErrorEntry) -> str:
    """"points" when a message only points at an error printed earlier ("... See root cause above", a
    worker's "please check the stack trace above"); "embeds" when it is raised in an `except` block and
    carries the caught exception's text (`f"Error in model execution: {e}"`). The lookup answers a paste
    of either with the error behind it, when it can tell which."""
    parts = parts_of_template(error.template) if error.template else ()
    if _POINTS_ELSEWHERE.search(" ".join(text for hole, text in parts if not hole)):
        return "points"
    caught = any(hole and _CAUGHT.fullmatch(text.strip()) for hole, text in parts)
    if caught and any(c.kind == "except" for site in error.sites for c in site.guard):
        return "embeds"
    return ""


# Wrappers whose cause the derived annotation names by the phase it fails in (annotate.ENGINE_FAILED, ENGINE_DIED): an
# error whose page says it ends the engine's start-up is one behind "Engine core initialization failed", one whose
# page says it ends the engine's step, one behind EngineDeadError.
_PHASE_WRAPPERS = (("the engine does not start:", "Engine core initialization failed"),
                   ("`EngineCore encountered a fatal error.`", "EngineCore encountered an issue"))


def wrapper_causes(errors, reports: dict[str, tuple[Report, ...]], history: History | None,
                   derived_meanings: dict[str, str]) -> dict[str, tuple[str, ...]]:
    """Each wrapper's most reported root causes: first those the reports' pastes show before it (reports.root_causes),
    then the reported errors whose own page says they end the phase the wrapper reports, most reported first."""
    present = {e.id for e in errors}
    shown = root_causes(reports, history.errors if history else None, present)
    wrappers = {e.id: e.template or "" for e in errors if wrapper_kind(e) == "points"}
    counted = [i for i in present if reports.get(i) and not counted_later(i, history.errors if history else None, present)]
    def releases(i: str) -> set[str]:
        seen = history.errors.get(i) if history else None
        return {a.ref for a in seen.releases} if seen else {"this"}

    causes = {}
    for w, template in wrappers.items():
        by_phase = [i for said, start in _PHASE_WRAPPERS if template.startswith(start)
                    for i in counted if said in derived_meanings.get(i, "") and releases(i) & releases(w)]
        ranked = [*shown.get(w, ()), *sorted(set(by_phase) - set(shown.get(w, ())), key=lambda i: (-len(reports[i]), i))]
        if ranked:
            causes[w] = tuple(ranked[:MAX_ROOT_CAUSES])
    return {**{w: c for w, c in shown.items() if w not in wrappers}, **causes}


def build_knowledge_base(
    catalog: Catalog,
    annotators: tuple[Annotator, ...] = (),
    glossary: tuple[GlossaryTerm, ...] = (),
    history: History | None = None,
    snapshots: dict[str, Snapshot] | None = None,
    reports: dict[str, tuple[Report, ...]] | None = None,
) -> KnowledgeBase:
    """Records for every error; later annotators' fields win over earlier ones'.

    With a history, each record carries its own; `snapshots` gives the release an error's
    entry comes from when that is not the catalog's (an error the newest release lacks);
    `reports`, each error's public reports (reports.along_lineage). The first annotator is the derived one: what it says
    of the phase an error ends lists that error behind the wrapper reporting the phase (wrapper_causes).
    """
    reports = reports or {}
    snapshots = snapshots or {}
    related = related_errors(catalog.errors)
    if history:
        related = {i: current_first(i, ids, history) for i, ids in related.items()}
    annotations, derived_meanings = {}, {}
    for error in catalog.errors:
        annotation = Annotation()
        for n, annotator in enumerate(annotators):
            annotation = merge_annotations(annotation, annotator(error))
            if n == 0:
                derived_meanings[error.id] = annotation.meaning or ""
        annotations[error.id] = annotation
    causes = wrapper_causes(catalog.errors, reports, history, derived_meanings)
    records = []
    for error in catalog.errors:
        annotation = annotations[error.id]
        records.append(
            ErrorRecord(
                id=error.id,
                exception=error.exception,
                template=error.template,
                kind=error.kind,
                placeholders=error.placeholders,
                pattern=error.pattern,
                sites=error.sites,
                title=title_of(error),
                subsystem=subsystem_of(error.sites[0].path),
                hierarchy=hierarchy(error.exception, catalog.exception_classes) if error.exception else (),
                annotation=annotation,
                related=related.get(error.id, ()),
                url=page_url(error.id),
                snapshot=snapshots.get(error.id, catalog.snapshot),
                terms=glossary_terms(error, glossary),
                history=history.errors.get(error.id) if history else None,
                wrapper=wrapper_kind(error),
                variants=error.variants,
                reports=reports.get(error.id, ()),
                root_causes=causes.get(error.id, ()),
            )
        )
    return KnowledgeBase(
        snapshot=catalog.snapshot,
        records=tuple(records),
        exception_classes=catalog.exception_classes,
        problems=catalog.problems,
        files=catalog.files,
        history=history,
        asserts=history.asserts if history else assert_sites([catalog]),
    )


_FIELDS = ("meaning", "triggers", "situations", "solutions", "example_fix")


def merge_annotations(base: Annotation, over: Annotation) -> Annotation:
    """`over`'s non-empty fields replace `base`'s, and so does their source; so does a field `over` names a source for
    while empty (a note that says there is none)."""
    values = {name: getattr(base, name) for name in _FIELDS}
    sources = dict(base.sources)
    for name in _FIELDS:
        value = getattr(over, name)
        if value or name in over.sources:
            values[name] = value
            if name in over.sources:
                sources[name] = over.sources[name]
    kind = over.kind if over.kind != "unknown" or "kind" in over.sources else base.kind
    return Annotation(**values, kind=kind, sources=sources, stale=base.stale or over.stale, logged=base.logged or over.logged)
