"""The mkdocs hooks: the generated index pages (generated/nav.json under docs_dir) appended to the nav, and the
marks Pagefind (the site's search, indexed after the build: see search.py) reads on each page."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path

NAV_JSON = "generated/nav.json"  # written by vllm_errors.render.render_pages
EXCLUDE = "data-search-exclude"  # what the templates mark: a heading (its whole section) or an element
IGNORE = ' data-pagefind-ignore="all"'
ARTICLE = '<article class="md-content__inner md-typeset">'
MARKED = re.compile(rf'(?<=\s){EXCLUDE}(?:="[^"]*")?(?=[\s>/])')  # the attribute, with the value md_in_html gives it
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def on_config(config):
    path = Path(config.docs_dir) / NAV_JSON
    if path.is_file():  # before the first render there is only the hand-written Home
        config.nav = list(config.nav or []) + json.loads(path.read_text(encoding="utf-8"))["nav"]
    return config


def on_page_content(html, page, config, files):
    return searchable_sections(html)


def on_post_page(output, page, config):
    """Pagefind indexes the pages whose article carries data-pagefind-body; a page whose front matter says
    `search: exclude: true` (an error the newest release no longer raises) has none."""
    if (page.meta.get("search") or {}).get("exclude"):
        return output
    return output.replace(ARTICLE, ARTICLE[:-1] + " data-pagefind-body>", 1)


class _TopLevel(HTMLParser):
    """The offsets of the top-level start tags of an HTML fragment, with their names and attributes."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=False)
        self.lines = [0]
        for line in html.splitlines(keepends=True):
            self.lines.append(self.lines[-1] + len(line))
        self.depth = 0
        self.tags: list[tuple[int, str, str]] = []  # offset of "<", tag name, the start tag's text
        self.feed(html)
        self.close()

    def _offset(self) -> int:
        line, column = self.getpos()
        return self.lines[line - 1] + column

    def handle_starttag(self, tag, attrs):
        if self.depth == 0:
            self.tags.append((self._offset(), tag, self.get_starttag_text() or ""))
        if tag not in VOID:
            self.depth += 1

    def handle_startendtag(self, tag, attrs):
        if self.depth == 0:
            self.tags.append((self._offset(), tag, self.get_starttag_text() or ""))

    def handle_endtag(self, tag):
        if tag not in VOID:
            self.depth = max(0, self.depth - 1)


def searchable_sections(html: str) -> str:
    """The page's content with what search leaves out marked for Pagefind: an element marked data-search-exclude,
    and every top-level element of a section whose heading is marked, up to the next heading (the rule of
    mkdocs-material's search, which these marks were first written for)."""
    marks = []
    ignoring = False
    for offset, tag, text in _TopLevel(html).tags:
        if re.fullmatch(r"h[1-6]", tag):
            ignoring = EXCLUDE in text
        if ignoring and EXCLUDE not in text:
            marks.append(offset + 1 + len(tag))
    for at in reversed(marks):
        html = html[:at] + IGNORE + html[at:]
    return MARKED.sub(lambda m: m.group(0) + IGNORE, html)
