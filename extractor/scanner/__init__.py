"""The scanner: the only stage that reads code with libcst. One file's bytes in, one ModuleScan out, never an exception."""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from itertools import accumulate
from typing import Callable, Iterable

import libcst as cst

from ..model import ModuleScan, Problem, module_scan_from_json, module_scan_to_json
from . import settings, units
from .raises import module_name, node_lines, scan_raises

__all__ = ["SCANNER_VERSION", "MAX_FILE_BYTES", "module_name", "scan_module", "scan_by_definition"]

# Bump when the scan of a file may change: the cache is keyed by it.
SCANNER_VERSION = "11"
# Files that declare settings are scanned whole: a flag's line is found by searching the whole text.
_SETTINGS_MARKERS = ("@config", "add_argument", settings.ENV_DICT)
MAX_FILE_BYTES = 2_000_000
MAX_NESTING = 200  # CPython's own limit on nested brackets
MAX_LINE = 10_000
_NOT_BRACKETS = re.compile(r"[^()\[\]{}]+")
_BRACKET_STEP = {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}


def _refused_by_python(text: str) -> str | None:
    """Why CPython would refuse a file that could hang or crash libcst's native parser, if it would.

    libcst segfaults on a few thousand nested brackets and takes minutes on a one-line
    expression of 50,000 terms; CPython refuses both at once. Asking CPython costs ~10 ms a
    file, so only files that look extreme (bracket depth, line length) are asked.
    """
    depth = max(accumulate(_BRACKET_STEP[c] for c in _NOT_BRACKETS.sub("", text)), default=0)
    longest = max(map(len, text.split("\n")), default=0)
    if depth <= MAX_NESTING and longest <= MAX_LINE:
        return None
    try:
        ast.parse(text)
    except (SyntaxError, RecursionError, MemoryError, ValueError) as e:
        return f"CPython refuses it: {type(e).__name__}: {getattr(e, 'msg', None) or e}"
    return None


def _decode(path: str, data: bytes) -> str | ModuleScan:
    if len(data) > MAX_FILE_BYTES:
        return ModuleScan(path=path, problems=(Problem(path=path, kind="size", detail=f"{len(data)} bytes, over {MAX_FILE_BYTES}"),))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        return ModuleScan(path=path, problems=(Problem(path=path, kind="encoding", detail=f"not UTF-8: {e.reason} at byte {e.start}"),))


def scan_module(path: str, data: bytes) -> ModuleScan:
    """Every raise and every assert with a message in one file; failures come back as problems."""
    text = _decode(path, data)
    if isinstance(text, ModuleScan):
        return text
    layout = units.top_units(text)
    return _scan_text(path, text, layout.units if layout else ())


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
    layout = units.top_units(text)
    if not layout or not layout.units or any(marker in text for marker in _SETTINGS_MARKERS):
        return _scan_text(path, text, layout.units if layout else ()), {}
    found = layout.units
    keys = [units.unit_key(SCANNER_VERSION, path, layout.context, u) for u in found]
    module_key = units.module_key(SCANNER_VERSION, path, text, found)
    stored = lookup([*keys, module_key])
    cached = [i for i, key in enumerate(keys) if key in stored]
    new: dict[str, bytes] = {}
    if len(cached) == len(found) and module_key in stored:
        top = module_scan_from_json(stored[module_key])
    else:
        scan = _scan_text(path, units.stubbed(text, found, cached), found)
        if scan.problems:
            return scan_module(path, data), {}
        top = _part(scan, lambda line: units.unit_of(line, found) is None, 0)
        new[module_key] = module_scan_to_json(top)
        for i, (unit, key) in enumerate(zip(found, keys)):
            if i not in cached:
                own = _part(scan, lambda line, u=unit: u.start <= line <= u.end, 1 - unit.start)
                new[key] = module_scan_to_json(own)
                stored[key] = new[key]
    pieces = [(site.line, site) for site in top.sites]
    classes = [(cls.line, cls) for cls in top.classes]
    for unit, key in zip(found, keys):
        own = module_scan_from_json(stored[key])
        pieces += [(unit.start, units.shift_site(site, unit.start - 1)) for site in own.sites]
        classes += [(unit.start, units.shift_class(cls, unit.start - 1)) for cls in own.classes]
    # In source order, as one visit of the whole file gives them: definitions do not overlap.
    pieces.sort(key=lambda item: item[0])
    classes.sort(key=lambda item: item[0])
    return ModuleScan(path=path, sites=tuple(s for _, s in pieces), classes=tuple(c for _, c in classes)), new


def _part(scan: ModuleScan, keep: Callable[[int], bool], delta: int) -> ModuleScan:
    """The sites and classes of a scan on the lines `keep` accepts, moved by `delta` lines."""
    return replace(
        scan,
        sites=tuple(units.shift_site(s, delta) for s in scan.sites if keep(s.line)),
        classes=tuple(units.shift_class(c, delta) for c in scan.classes if keep(c.line)),
    )


def _scan_text(path: str, text: str, found: tuple[units.Unit, ...]) -> ModuleScan:
    refused = _refused_by_python(text)
    if refused:
        return ModuleScan(path=path, problems=(Problem(path=path, kind="syntax", detail=refused),))
    try:
        module = cst.parse_module(text)
    except cst.ParserSyntaxError as e:
        detail = f"line {e.raw_line}, column {e.raw_column}: {e.message}"
        return ModuleScan(path=path, problems=(Problem(path=path, kind="syntax", detail=detail),))
    try:
        lines = node_lines(module)
        sites, classes = scan_raises(path, module, text, lines, found)
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
        )
    except RecursionError:
        return ModuleScan(path=path, problems=(Problem(path=path, kind="crash", detail="nesting too deep to scan"),))
