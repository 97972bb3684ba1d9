"""Grouping raise sites into errors: identity, exception classes and their hierarchy."""

from __future__ import annotations

import builtins
import hashlib
from collections import defaultdict
from dataclasses import replace
from typing import Iterable

from .messages import identity_key, parts_of_template
from .model import Catalog, ErrorEntry, ExceptionClass, Message, ModuleScan, RaiseSite, Snapshot
from .scanner import module_name

_EXCEPTION_SUFFIXES = ("Error", "Exception", "Exit", "Warning", "Interrupt")


def is_builtin_exception(name: str) -> bool:
    obj = getattr(builtins, name, None)
    return isinstance(obj, type) and issubclass(obj, BaseException)


def error_id(repository: str, exception: str, key: str) -> str:
    return hashlib.sha256(f"{repository}\x1f{exception}\x1f{key}".encode()).hexdigest()[:16]


def error_key(site: RaiseSite) -> tuple[str, str]:
    """(exception, message key): what makes two sites the same error.

    A message with literal text is its own key, so the id survives moving code. Sites with no
    literal text (`raise NotImplementedError`, re-raises, computed messages) would otherwise all
    collapse into one error per type, so their key names the module and function instead.
    """
    exception = site.exception.qualname or site.exception.written
    template = site.message.template
    if template:
        key = identity_key(parts_of_template(template))
        if key.replace("\x00", "").strip():
            return exception, key
    where = f"{module_name(site.path)}:{site.function}"
    return exception, f"\x00{site.message.form}\x00{where}"


def class_homes(candidates: Iterable[ExceptionClass]) -> dict[str, list[str]]:
    """Each class name and the qualified names defining it: what canonical_name looks re-exports up in."""
    homes: dict[str, list[str]] = defaultdict(list)
    for cls in candidates:
        homes[cls.name].append(cls.qualname)
    return homes


def exception_classes(candidates: list[ExceptionClass], by_name: dict[str, list[str]]) -> tuple[ExceptionClass, ...]:
    """The classes that derive from an exception, directly or through other scanned classes."""
    fixed = [replace(cls, bases=tuple(canonical_name(b, by_name) for b in cls.bases)) for cls in candidates]
    known: set[str] = set()
    changed = True
    while changed:
        changed = False
        for cls in fixed:
            if cls.qualname not in known and any(_is_exception_base(b, known) for b in cls.bases):
                known.add(cls.qualname)
                changed = True
    return tuple(sorted((c for c in fixed if c.qualname in known), key=lambda c: (c.qualname, c.path, c.line)))


def _is_exception_base(base: str, known: set[str]) -> bool:
    if base in known or is_builtin_exception(base):
        return True
    # A third-party base (fastapi.HTTPException, torch.OutOfMemoryError) cannot be scanned: trust its name.
    return not base.startswith("vllm.") and base.rpartition(".")[2].endswith(_EXCEPTION_SUFFIXES)


def canonical_name(qualname: str, by_name: dict[str, list[str]]) -> str:
    """Map a re-export (`vllm.VLLMValidationError`) to where the class is defined, when that is unambiguous."""
    if not qualname.startswith("vllm.") or qualname in by_name.get(qualname.rpartition(".")[2], ()):
        return qualname
    module, _, name = qualname.rpartition(".")
    homes = by_name.get(name, [])
    inside = [h for h in homes if h.startswith(module + ".")]
    if len(inside) == 1:
        return inside[0]
    return homes[0] if len(homes) == 1 else qualname


def build_catalog(snapshot: Snapshot, scans: Iterable[ModuleScan], files: int) -> Catalog:
    scans = list(scans)
    candidates = [cls for scan in scans for cls in scan.classes]
    by_name = class_homes(candidates)
    classes = exception_classes(candidates, by_name)
    defaults = class_messages(classes)
    groups: dict[tuple[str, str], list[RaiseSite]] = defaultdict(list)
    for scan in scans:
        for site in scan.sites:
            qual = site.exception.qualname
            if qual:
                names = [canonical_name(part.strip(), by_name) for part in qual.split("|")]
                site = replace(site, exception=replace(site.exception, qualname=" | ".join(names)))
                if site.message.form == "empty" and names[0] in defaults and len(names) == 1:
                    site = replace(site, message=defaults[names[0]])
            groups[error_key(site)].append(site)
    errors = []
    for (exception, key), sites in groups.items():
        sites.sort(key=lambda s: (s.path, s.line))
        first = sites[0]
        errors.append(
            ErrorEntry(
                id=error_id(snapshot.repository, exception, key),
                exception=exception,
                template=first.message.template,
                kind=first.kind,
                placeholders=first.message.placeholders,
                pattern=first.message.pattern,
                sites=tuple(sites),
                variants=tuple(dict.fromkeys(v for s in sites for v in s.message.variants if v != first.message.template)),
            )
        )
    errors.sort(key=lambda e: e.id)
    problems = tuple(sorted((p for scan in scans for p in scan.problems), key=lambda p: (p.path, p.kind)))
    return Catalog(
        snapshot=snapshot,
        errors=tuple(errors),
        exception_classes=classes,
        problems=problems,
        files=files,
        config_fields=tuple(sorted((f for scan in scans for f in scan.config_fields), key=lambda f: (f.config, f.name, f.path))),
        flags=tuple(sorted((f for scan in scans for f in scan.flags), key=lambda f: (f.flags, f.config, f.field))),
        env_vars=tuple(sorted((v for scan in scans for v in scan.env_vars), key=lambda v: (v.name, v.path))),
        attributes=tuple(sorted((a for scan in scans for a in scan.attributes), key=lambda a: (a.cls, a.attr, a.line))),
    )


def class_messages(classes: Iterable[ExceptionClass]) -> dict[str, Message]:
    """What `raise Cls()` says, per class: its own __init__'s message, else the nearest base class's."""
    table = {c.qualname: c for c in classes}
    found: dict[str, Message] = {}
    for qualname in table:
        chain = hierarchy(qualname, classes=table.values())
        own = next((table[q].message for q in chain if q in table and table[q].message), None)
        if own is not None:
            found[qualname] = replace(own, form="class", note=f"the message {qualname.rpartition('.')[2]} carries when raised without one")
    return found


def hierarchy(qualname: str, classes: Iterable[ExceptionClass]) -> tuple[str, ...]:
    """`VLLMValidationError -> VLLMClientError -> VLLMError -> Exception`, following first bases."""
    table = {c.qualname: c for c in classes}
    chain = [qualname]
    while chain[-1] in table and table[chain[-1]].bases and len(chain) < 20:
        base = table[chain[-1]].bases[0]
        if base in chain:
            break
        chain.append(base)
    return tuple(chain)


def resolve_factories(catalog: Catalog) -> Catalog:
    """The catalog with each error raised by a helper that builds it (`raise _dispatch_expr_error(node, "...")`) given the
    exception class the helper is annotated to return (`-> ValueError`), where that is an exception class; its id stays
    the one its sites gave it. Needs the program model: only the release that is annotated pays for it."""
    program = catalog.program
    if program is None:
        return catalog
    known = {cls.name: cls.qualname for cls in catalog.exception_classes}
    errors = []
    for error in catalog.errors:
        ref = error.sites[0].exception
        if ref.how == "factory" and error.exception == ref.written:
            returned = program.returns(ref.written.partition("(")[0].rpartition(".")[2].strip())
            resolved = returned if is_builtin_exception(returned) else known.get(returned, "")
            error = replace(error, exception=resolved) if resolved else error
        errors.append(error)
    return replace(catalog, errors=tuple(errors))
