"""The scanner: the only stage that reads code with libcst. One file's bytes in, one ModuleScan out, never an exception."""

from __future__ import annotations

import ast
import dataclasses
import io
import re
import tokenize
from itertools import accumulate
from typing import Callable, Iterable

import libcst as cst

from ..markup import printable
from ..model import ModuleScan, Problem, module_scan_from_json, module_scan_to_json
from . import settings, units
from .raises import _SETTING_READ, module_name, node_lines, scan_raises

__all__ = ["SCANNER_VERSION", "MAX_FILE_BYTES", "module_name", "scan_module", "scan_by_definition", "source_tree"]

# Bump when the scan of a file may change: the cache is keyed by it.
SCANNER_VERSION = "21"
# Files that declare settings are scanned whole: a flag's line is found by searching the whole text.
_SETTINGS_MARKERS = ("@config", "add_argument", settings.ENV_DICT)
_ACTIVE = re.compile(r"\b(?:raise|assert|class)\b")


def _inert(unit: units.Unit) -> bool:
    """A function or method in which a scan finds nothing: no raise, assert or class in it, no
    `self.x = <a setting>`; not an `__init__` (an exception class's message is read from it). Its scan
    is known without parsing it: libcst sees it stubbed, as if cached."""
    if unit.kind == "class" or unit.name == "__init__":
        return False
    return not _ACTIVE.search(unit.text) and not ("self." in unit.text and _SETTING_READ.search(unit.text))
MAX_FILE_BYTES = 2_000_000
MAX_DEPTH = 500  # the deepest syntax tree parsed: vLLM's deepest is about 30; libcst needs 80 MB at 1,000, and crashes at 9,000
MAX_NESTING = 200  # CPython's own limit on nested brackets
MAX_LINE = 2_000
_NOT_BRACKETS = re.compile(r"[^()\[\]{}]+")
_BRACKET_STEP = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}
_OPERATOR_RUN = re.compile(r"(?:[-+~]\s*){300}")  # `x = ------...1`, over lines or not
_LEADING = re.compile(r"^[ \t\f]+", re.M)


def _parsed(path: str, text: str) -> tuple[ast.Module | None, ModuleScan | None]:
    """CPython's tree of the file, and the scan of a file refused before libcst reads it (else None)."""
    tree = units.parse(text)
    refused = _refused(text, tree)
    if refused is None:
        return tree, None
    kind, line, why = refused
    return tree, ModuleScan(path=path, problems=(Problem(path=path, kind=kind, detail=why, line=line),))


def _refused(text: str, tree: ast.Module | None) -> tuple[str, int, str] | None:
    """(problem kind, line, why) for a file the scanner does not hand to libcst: one it cannot read safely.

    libcst's native parser takes gigabytes and then crashes on a few thousand nested operators,
    and minutes on a statement of thousands of terms. Where CPython parses the file, the depth of
    its tree decides; where it cannot (a newer Python's syntax can be why), files that look
    extreme (bracket depth, line length, long runs of operators) are refused.
    """
    if "\x00" in text:
        return "syntax", text.count("\n", 0, text.index("\x00")) + 1, "a NUL byte, which CPython refuses in source code"
    if tree is not None:
        nested = units.depth(tree)
        return ("depth", 0, f"its syntax nests {nested} levels deep, over the {MAX_DEPTH} the scanner parses") if nested > MAX_DEPTH else None
    depth = max(accumulate(_BRACKET_STEP[c] for c in _NOT_BRACKETS.sub("", text)), default=0)
    longest = max(map(len, text.split("\n")), default=0)
    if depth > MAX_NESTING or longest > MAX_LINE or _OPERATOR_RUN.search(text):
        return "depth", 0, "CPython cannot parse it, and it nests or runs on further than the scanner parses safely"
    return None


def _decode(path: str, data: bytes) -> str | ModuleScan:
    """The file's text as CPython reads it: in its declared encoding (PEP 263), with universal newlines."""
    if len(data) > MAX_FILE_BYTES:
        return ModuleScan(path=path, problems=(Problem(path=path, kind="size", detail=f"{len(data)} bytes, over {MAX_FILE_BYTES}"),))
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as e:
        return ModuleScan(path=path, problems=(Problem(path=path, kind="encoding", detail=str(e.msg if hasattr(e, "msg") else e)),))
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        what = "UTF-8" if encoding.startswith("utf-8") else encoding
        return ModuleScan(path=path, problems=(Problem(path=path, kind="encoding", detail=f"not {what}: {e.reason} at byte {e.start}", line=line),))
    # Line ends as CPython counts them: \r\n and a lone \r end a line too.
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def source_tree(data: bytes) -> tuple[str, ast.Module] | None:
    """The file's text and CPython's tree of it, as the scan read them (the tree comes from units.parse's memory
    when the scan just parsed it); None when either fails."""
    text = _decode("", data)
    tree = units.parse(text) if isinstance(text, str) else None
    return (text, tree) if tree is not None else None


def scan_module(path: str, data: bytes) -> ModuleScan:
    """Every raise and every assert with a message in one file; failures come back as problems."""
    text = _decode(path, data)
    if isinstance(text, ModuleScan):
        return text
    tree, refused = _parsed(path, text)
    return refused or _scan_text(path, text, units.top_units(text, tree) or ())


Lookup = Callable[[Iterable[str]], dict[str, bytes]]


def scan_by_definition(path: str, data: bytes, lookup: Lookup) -> tuple[ModuleScan, dict[str, bytes]]:
    """The same scan as `scan_module`, reusing the cached scans of the file's unchanged top-level definitions.

    `lookup` fetches stored scans by key. Returns the file's scan and the entries to store:
    each definition scanned now (its lines relative to its start), and the module-level
    statements' own results. A file that cannot be split this way is scanned whole.
    """
    text = _decode(path, data)
    if isinstance(text, ModuleScan):
        return text, {}
    tree, refused = _parsed(path, text)
    if refused:
        return refused, {}
    found = units.top_units(text, tree)
    if not found or any(marker in text for marker in _SETTINGS_MARKERS):
        return _scan_text(path, text, found or ()), {}
    keys = [units.unit_key(SCANNER_VERSION, path, u) for u in found]
    module_key = units.module_key(SCANNER_VERSION, path, text, found)
    stored = lookup([*keys, module_key])
    missing = [i for i, key in enumerate(keys) if key not in stored]
    new: dict[str, bytes] = {}
    scanned: dict[str, ModuleScan] = {}  # what this call scanned, not to be read back from JSON
    inert = {i for i in missing if _inert(found[i])}
    for i in inert:
        scanned[keys[i]] = ModuleScan(path=path)
        new[keys[i]] = module_scan_to_json(scanned[keys[i]])
    missing = [i for i in missing if i not in inert]
    if missing or module_key not in stored:
        # Stub what is cached or inert: a whole class when it and all its methods are, else each such method or function.
        whole = {i for i, u in enumerate(found) if u.kind == "class" and not any(j == i or found[j].owner == i for j in missing)}
        # ... but never the __init__ of a class scanned now: the class's message is read from it.
        stub = [
            i for i, u in enumerate(found)
            if i not in missing and u.owner not in whole and (u.kind != "class" or i in whole) and (u.name != "__init__" or u.owner is None)
        ]
        scan = _scan_text(path, units.stubbed(text, found, stub), found)
        if scan.problems:
            return scan_module(path, data), {}
        parts = _by_unit(path, scan, found)
        fresh = set(missing) | {i for i, u in enumerate(found) if u.kind == "class" and i not in whole}
        for i in sorted(fresh):
            scanned[keys[i]] = parts.get(i, ModuleScan(path=path))
            new[keys[i]] = module_scan_to_json(scanned[keys[i]])
        scanned[module_key] = parts.get(None, ModuleScan(path=path))
        new[module_key] = module_scan_to_json(scanned[module_key])
    top = scanned.get(module_key) or module_scan_from_json(stored[module_key])
    # In source order, as one visit of the whole file gives them: a function's results stay together
    # at its first line, the rest (a class's own lines, the module's) sit at their own lines.
    pieces = [(site.line, site) for site in top.sites]
    classes = [(cls.line, cls) for cls in top.classes]
    attributes = list(top.attributes)
    for unit, key in zip(found, keys):
        own = scanned.get(key) or module_scan_from_json(stored[key])
        anchor = (lambda line: line) if unit.kind == "class" else (lambda line, start=unit.start: start)
        for site in own.sites:
            site = units.shift_site(site, unit.start - 1)
            pieces.append((anchor(site.line), site))
        for cls in own.classes:
            cls = units.shift_class(cls, unit.start - 1)
            classes.append((anchor(cls.line), cls))
        attributes += [units.shift_attribute(fact, unit.start - 1) for fact in own.attributes]
    pieces.sort(key=lambda item: item[0])
    classes.sort(key=lambda item: item[0])
    attributes.sort(key=lambda fact: fact.line)
    return ModuleScan(path=path, sites=tuple(s for _, s in pieces), classes=tuple(c for _, c in classes), attributes=tuple(attributes)), new


def _by_unit(path: str, scan: ModuleScan, found: tuple[units.Unit, ...]) -> dict[int | None, ModuleScan]:
    """A scan's sites and classes by the unit holding them, lines relative to its start; under None,
    the module's own, as they are."""
    sites: dict[int | None, list] = {}
    classes: dict[int | None, list] = {}
    attributes: dict[int | None, list] = {}
    for site in scan.sites:
        i = units.unit_of(site.line, found)
        sites.setdefault(i, []).append(site if i is None else units.shift_site(site, 1 - found[i].start))
    for cls in scan.classes:
        i = units.unit_of(cls.line, found)
        classes.setdefault(i, []).append(cls if i is None else units.shift_class(cls, 1 - found[i].start))
    for fact in scan.attributes:
        i = units.unit_of(fact.line, found)
        attributes.setdefault(i, []).append(fact if i is None else units.shift_attribute(fact, 1 - found[i].start))
    return {i: ModuleScan(path=path, sites=tuple(sites.get(i, ())), classes=tuple(classes.get(i, ())), attributes=tuple(attributes.get(i, ())))
            for i in sites.keys() | classes.keys() | attributes.keys()}


def _scan_text(path: str, text: str, found: tuple[units.Unit, ...]) -> ModuleScan:
    return _printable(_scan_text_as_is(path, text, found))


def _printable(value):
    """Every string of a scan safe for a terminal and a page (`markup.printable`): whatever vLLM's
    source holds, it is shown, never obeyed."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, tuple):
        return tuple(_printable(v) for v in value)
    if isinstance(value, dict):
        return {k: _printable(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value):
        return dataclasses.replace(value, **{f.name: _printable(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init})
    return value


def _scan_text_as_is(path: str, text: str, found: tuple[units.Unit, ...]) -> ModuleScan:
    try:
        module = _parse(text)
    except cst.ParserSyntaxError as e:
        detail = f"column {e.raw_column}: {e.message}"
        return ModuleScan(path=path, problems=(Problem(path=path, kind="syntax", detail=detail, line=e.raw_line),))
    except (RecursionError, MemoryError):
        return ModuleScan(path=path, problems=(Problem(path=path, kind="crash", detail="nesting too deep to parse"),))
    except Exception as e:  # noqa: BLE001 - whatever the parser does, the scan goes on: one file is one problem
        return ModuleScan(path=path, problems=(Problem(path=path, kind="crash", detail=f"the parser failed: {type(e).__name__}: {e}"),))
    try:
        lines = node_lines(module, units.parse(text), text)
        sites, classes, attributes = scan_raises(path, module, text, lines, found)
        fields = settings.config_fields(path, module, lines) if "@config" in text else []
        flags = settings.flags(path, module, text) if "add_argument" in text else []
        if fields and "add_argument" in text:
            flags += settings.generated_flags(path, module, text, fields)
        return ModuleScan(
            path=path,
            sites=sites,
            classes=classes,
            config_fields=tuple(fields),
            flags=tuple(flags),
            env_vars=tuple(settings.env_vars(path, module, text)) if settings.ENV_DICT in text else (),
            attributes=attributes,
        )
    except RecursionError:
        return ModuleScan(path=path, problems=(Problem(path=path, kind="crash", detail="nesting too deep to scan"),))
    except Exception as e:  # noqa: BLE001 - a bug of the scanner costs this file, reported, not the release
        return ModuleScan(path=path, problems=(Problem(path=path, kind="crash", detail=f"the scanner failed: {type(e).__name__}: {e}"),))


def _parse(text: str) -> cst.Module:
    """libcst's tree of the text. Indentation CPython accepts and libcst may not (tabs, form feeds)
    is retried as spaces, which keeps every line where it is."""
    try:
        return cst.parse_module(text)
    except cst.ParserSyntaxError:
        if not any("\t" in m.group(0) or "\f" in m.group(0) for m in _LEADING.finditer(text)):
            raise
        # CPython ignores a form feed in indentation and puts tabs at multiples of 8.
        return cst.parse_module(_LEADING.sub(lambda m: m.group(0).replace("\f", "").expandtabs(8), text))
