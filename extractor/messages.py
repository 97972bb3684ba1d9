"""Message templates: literal text and placeholders, the regular expression a formatted message matches, and the identity key."""

from __future__ import annotations

import re
from typing import Iterable

from .model import Message

# A message part is literal text, or the source text of an expression that fills a placeholder.
Part = tuple[bool, str]  # (is_placeholder, text)

_SPACE = re.compile(r"\s+")


def merge_parts(parts: Iterable[Part]) -> tuple[Part, ...]:
    """Join adjacent literal parts, and drop empty ones, so equal messages have equal parts."""
    out: list[Part] = []
    for hole, text in parts:
        if not hole and not text:
            continue
        if out and not hole and not out[-1][0]:
            out[-1] = (False, out[-1][1] + text)
        else:
            out.append((hole, text))
    return tuple(out)


def template_of(parts: tuple[Part, ...]) -> str:
    """Python's format-string convention: `{expr}` per placeholder, literal braces doubled."""
    return "".join(
        "{" + text + "}" if hole else text.replace("{", "{{").replace("}", "}}") for hole, text in parts
    )


def pattern_of(parts: tuple[Part, ...]) -> str:
    """A regex for the formatted message: literal text exact but for runs of white space, a lazy group per placeholder."""
    out = []
    holes = 0
    for hole, text in parts:
        if hole:
            out.append(f"(?P<p{holes}>.*?)")
            holes += 1
        else:
            out.append(r"\s+".join(re.escape(chunk) for chunk in _SPACE.split(text)))
    return "".join(out)


def identity_key(parts: tuple[Part, ...]) -> str:
    """What makes two messages the same error: the literal text, white space folded, placeholders unnamed.

    Naming the placeholders would split one message users see into several errors whenever
    two sites fill it from differently named variables.
    """
    text = "".join("\x00" if hole else text for hole, text in parts)
    return _SPACE.sub(" ", text).strip()


def message_of(parts: Iterable[Part], form: str) -> Message:
    """The Message for a list of parts; none is built when nothing of it is literal."""
    merged = merge_parts(parts)
    holes = tuple(text for hole, text in merged if hole)
    if not merged:
        return Message(template="", placeholders=(), form="empty", pattern="")
    if all(hole for hole, _ in merged):
        shown = ", ".join(f"`{h}`" for h in holes)
        return Message(
            template=None,
            placeholders=holes,
            form="dynamic",
            pattern=None,
            note=f"the message is computed at run time from {shown}",
        )
    return Message(template=template_of(merged), placeholders=holes, form=form, pattern=pattern_of(merged))


def parts_of_template(template: str) -> tuple[Part, ...]:
    """Parse a template back into parts; placeholder text may itself hold balanced braces."""
    parts: list[Part] = []
    literal: list[str] = []
    i = 0
    while i < len(template):
        ch = template[i]
        if ch in "{}" and template[i : i + 2] in ("{{", "}}"):
            literal.append(ch)
            i += 2
        elif ch == "{":
            depth, j = 1, i + 1
            while j < len(template) and depth:
                depth += {"{": 1, "}": -1}.get(template[j], 0)
                j += 1
            if literal:
                parts.append((False, "".join(literal)))
                literal = []
            parts.append((True, template[i + 1 : j - 1]))
            i = j
        else:
            literal.append(ch)
            i += 1
    if literal:
        parts.append((False, "".join(literal)))
    return tuple(parts)


def shown_template(template: str) -> str:
    """The message as people read it: literal braces single again, placeholders as `{expr}`.

    Ambiguous where a message has literal braces, which is why the catalog keeps the
    format-string form; titles and pages show this one, which matches what users paste.
    """
    return "".join("{" + text + "}" if hole else text for hole, text in parts_of_template(template))
