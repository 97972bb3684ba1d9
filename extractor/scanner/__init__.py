"""The scanner: the only stage that reads code with libcst. One file's bytes in, one ModuleScan out, never an exception."""

from __future__ import annotations

import ast
import re
from itertools import accumulate

import libcst as cst

from ..model import ModuleScan, Problem
from . import settings
from .raises import module_name, node_lines, scan_raises

__all__ = ["SCANNER_VERSION", "MAX_FILE_BYTES", "module_name", "scan_module"]

# Bump when the scan of a file may change: the cache is keyed by it.
SCANNER_VERSION = "10"
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


def scan_module(path: str, data: bytes) -> ModuleScan:
    """Every raise and every assert with a message in one file; failures come back as problems."""
    if len(data) > MAX_FILE_BYTES:
        return ModuleScan(path=path, problems=(Problem(path=path, kind="size", detail=f"{len(data)} bytes, over {MAX_FILE_BYTES}"),))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return ModuleScan(path=path, problems=(Problem(path=path, kind="encoding", detail=f"not UTF-8: {e.reason} at byte {e.start}"),))
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
        sites, classes = scan_raises(path, module, text, lines)
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
