"""Markdown building blocks shared by the annotators and the renderer: text that renders as itself, code spans."""

from __future__ import annotations

import html
import re

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|])")  # Python-Markdown's escapable characters, with tables' `|`


def fold(text: str) -> str:
    """White space, newlines included, as single spaces: inline contexts have no lines."""
    return " ".join(str(text).split())


def md_escape(text: str) -> str:
    return html.escape(_MD_SPECIAL.sub(r"\\\1", text), quote=False)


def md(text: object) -> str:
    """Markdown inline text that renders as exactly `text`: no markup, no HTML, no line breaks.

    Backslashes go first so every Markdown special is literal, then HTML's `<` and `&`
    become entities (Markdown cannot backslash-escape them).
    """
    return md_escape(fold(text))


def code(text: object) -> str:
    """An inline code span holding `text`: fenced by one backtick more than its longest run of backticks.

    A space (which Markdown strips) pads a backtick at either end, and a leading `#!` or `:::`,
    which inlinehilite would read as a language to highlight in.
    """
    text = fold(text)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith(("`", "#!", ":::")) or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def one_line(source: str) -> str:
    """Code written over several lines, on one: no space after an opening bracket or before a closing one."""
    out = ""
    for piece in str(source).split("\n"):
        piece = piece.strip()
        if not piece:
            continue
        if out and not out.endswith(("(", "[", "{")) and not piece.startswith((")", "]", "}")):
            out += " "
        out += piece
    return out
