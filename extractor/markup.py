"""Markdown building blocks shared by the annotators and the renderer: text that renders as itself, code spans, contributed Markdown made safe."""

from __future__ import annotations

import html
import re
from functools import cache

import markdown
import nh3

_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|])")  # Python-Markdown's escapable characters, with tables' `|`


# Controls but tab and newline, DEL, C1 controls, and the marks that reorder text (the right-to-left override)
_UNPRINTABLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """Text from vLLM's source made safe for a terminal and a page: control characters (colour codes
    included) and direction overrides shown as Python writes them (`\\x1b`, `\\u202e`)."""
    return _UNPRINTABLE.sub(lambda m: repr(m.group(0))[1:-1] if ord(m.group(0)) < 0x100 else f"\\u{ord(m.group(0)):04x}", text)


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


_DOC_CODE = re.compile(r"``(.+?)``|`([^`]+)`")  # reStructuredText's ``x`` and Markdown's `x` in a docstring


def doc_md(text: object) -> str:
    """Documentation as Markdown that renders as its author meant: ``x`` and `x` as code spans, the rest literal."""
    text, out, at = fold(text), [], 0
    for found in _DOC_CODE.finditer(text):
        out += [md_escape(text[at : found.start()]), code(found.group(1) or found.group(2))]
        at = found.end()
    return "".join(out) + md_escape(text[at:])


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


# --- contributed Markdown (curated notes, the glossary): what it may render to ------------------

# The markup Markdown and the site's extensions write, and nothing that runs, styles, frames or tracks.
_POLICY = dict(
    tags={
        "a", "abbr", "b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em",
        "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "img", "ins", "kbd", "li", "mark", "ol", "p",
        "pre", "s", "span", "strong", "sub", "summary", "sup", "table", "tbody", "td", "th", "thead", "tr", "ul",
    },
    clean_content_tags={"script", "style", "iframe", "object", "embed", "template", "noscript", "textarea", "select", "svg", "math"},
    attributes={"*": {"class", "title"}, "a": {"href"}, "img": {"src", "alt"}, "ol": {"start"}, "th": {"style"}, "td": {"style"}},
    filter_style_properties={"text-align"},  # tables' column alignment
    url_schemes={"http", "https", "mailto"},
    link_rel=None,  # nothing opens a new window, and an added attribute would read as a change below
)
_SAFE_SCHEMES = {"http", "https", "mailto"}
# The HTML-writing extensions of mkdocs.yml's markdown_extensions, so the check below sees what the site will.
_EXTENSIONS = ("attr_list", "md_in_html", "tables", "admonition", "pymdownx.details", "pymdownx.superfences", "pymdownx.inlinehilite", "pymdownx.highlight")

# What Markdown shows as written: fenced blocks (to their closing fence or the end), code spans
# (within one paragraph), autolinks. The sanitizer would turn their `<` and `&` into visible entities.
_CODE = re.compile(
    r"^[ \t]*(?P<fence>`{3,}|~{3,})[^\n]*\n(?:.*?^[ \t]*(?P=fence)[`~]*[ \t]*$|.*\Z)"
    r"|(?<![\\`])(?P<ticks>`+)(?!`)(?:(?!\n[ \t]*\n).)+?(?<!`)(?P=ticks)(?!`)"
    r"|<(?:[Ff]|[Hh][Tt])[Tt][Pp][Ss]?://[^<>]*>|<[^<> !]+@[^@<> ]+>",
    re.M | re.S,
)
_HTML = re.compile(r"<(?:/?[A-Za-z][^<>@ ]*(?: [^<>]*)?|!--.*?--|[!?][^<>]*)>", re.S)  # what Markdown passes on as raw HTML
_LINK = re.compile(r"""(?<!\\)(!?)\[([^\[\]]*)\]\(\s*(<[^<>\n]*>|(?:[^\s()<>]|\([^\s()<>]*\))*)(?:\s+(?:"[^"]*"|'[^']*'))?\s*\)""")
_REFERENCE = re.compile(r"^([ ]{0,3})\[([^\[\]]*)\]:[ \t]*\n?[ \t]*(\S+)", re.M)
_ATTRIBUTE_LIST = re.compile(r"(?<!\\)\{(?=[^{}\n]*\})")  # attr_list would turn it into attributes


def safe_markdown(text: str) -> str:
    """Markdown written by anyone, as a page may hold it: raw HTML cut to `_POLICY`, links only to the web and mail.

    Code is kept as written (Markdown shows it as text); elsewhere raw HTML goes through nh3 (its `&lt;`
    and `&amp;` render as `<` and `&`), links and images to other schemes become their text, and attribute
    lists become literal braces. Then the whole is rendered as the site will and nh3 must find nothing more
    to remove, or ValueError says what is left: this catches what the steps above miss (an entity-encoded
    `javascript:`, a backtick that pairs differently), whatever the reason.
    """
    parts = []
    at = 0
    for m in _CODE.finditer(text):
        parts += [_clean_prose(text[at : m.start()]), m.group()]
        at = m.end()
    parts.append(_clean_prose(text[at:]))
    result = "".join(parts)
    _check_rendered(result)
    return result


def _clean_prose(text: str) -> str:
    if _HTML.search(text):
        # A `<` that Markdown shows as text (`a<b`) would open a tag for nh3 and take the text after it.
        parts, at = [], 0
        for m in _HTML.finditer(text):
            parts += [text[at : m.start()].replace("<", "&lt;"), m.group()]
            at = m.end()
        parts.append(text[at:].replace("<", "&lt;"))
        text = nh3.clean("".join(parts), **_POLICY).replace("&gt;", ">")  # a `>` opens no tag, and starts a block quote
    text = _LINK.sub(lambda m: m.group() if _safe_url(m.group(3)) else m.group(2), text)
    text = _REFERENCE.sub(lambda m: m.group() if _safe_url(m.group(3)) else m.group(1) + "\\" + m.group()[len(m.group(1)) :], text)
    return _ATTRIBUTE_LIST.sub(r"\\{", text)


def _safe_url(target: str) -> bool:
    """A relative URL, or one to the web or mail, as a browser reads it (entities decoded, control characters and spaces dropped)."""
    url = re.sub(r"[\x00-\x20]", "", html.unescape(target.strip("<>")))
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.\-]*):", url)
    return scheme is None or scheme.group(1).lower() in _SAFE_SCHEMES


@cache
def _markdown() -> markdown.Markdown:
    return markdown.Markdown(extensions=list(_EXTENSIONS))


def _check_rendered(text: str) -> None:
    """Fails when the site's HTML for `text` holds anything `_POLICY` removes.

    Both sides are nh3's own parse (as a browser parses), once with the policy and once allowing every
    tag, attribute and URL scheme the HTML could hold, so a parser that reads it differently cannot hide one.
    """
    rendered = _markdown().reset().convert(text)
    kept = _folded_styles(nh3.clean(rendered, **_POLICY))
    whole = _folded_styles(nh3.clean(rendered, **_everything_in(rendered)))
    if kept != whole:
        at = next((i for i, (a, b) in enumerate(zip(kept, whole)) if a != b), min(len(kept), len(whole)))
        start = whole.rfind("<", 0, at + 1)
        left = whole[start : whole.find(">", at) + 1 or None] if start >= 0 else whole[at:]
        raise ValueError(f"renders to markup a page may not hold ({fold(left)[:80]}): write Markdown, with links to http(s) or mailto only")


def _everything_in(rendered: str) -> dict:
    """An nh3 policy that keeps all of `rendered`: its tag names, attributes by any first character, every `word:` as a scheme."""
    names = {n for m in re.findall(r"</?([A-Za-z][^\s/>]*)", rendered) for n in (m, m.lower())}
    names |= {n.replace("\0", "\ufffd") for n in names}  # as the HTML parser reads a NUL
    urls = re.sub(r"[\x00-\x20]", "", html.unescape(rendered))  # browsers drop tabs and newlines inside a URL
    schemes = {s for m in re.findall(r"[A-Za-z][A-Za-z0-9+.\-]*(?=:)", urls) for s in (m, m.lower())}
    return dict(
        tags=names,
        clean_content_tags=set(),
        attributes={},
        generic_attribute_prefixes=set(rendered) | set(rendered.lower()) | {"\ufffd"},
        url_schemes=schemes,
        strip_comments=False,
        link_rel=None,
    )


def _folded_styles(cleaned: str) -> str:
    """nh3 writes `text-align:left` for Markdown's `text-align: left;`: the same style, compared as one."""
    return re.sub(r'style="([^"]*)"', lambda m: 'style="' + re.sub(r"\s+", "", m.group(1)).rstrip(";") + '"', cleaned)
