"""The renderer: the knowledge base as Markdown pages for mkdocs, from Jinja templates and small escaping filters."""

from __future__ import annotations

import builtins
import html
import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable
from urllib.parse import quote


import jinja2

from .markup import code, fold, md, md_escape, one_line
from .messages import shown_template
from .model import Annotation, Appearance, Condition, ErrorHistory, ErrorRecord, KnowledgeBase, RaiseSite, ReleaseNotes, Report, SiteRef, Snapshot
from .resources import DATA_DIR

TEMPLATES = DATA_DIR / "templates"
SITES_IN_FULL = 3  # an error's first sites are shown open; the rest are folded, so a 44-site page stays readable
TYPE_PAGE_MIN = 5  # exception types with fewer errors share a page with their family
LISTED_TITLE = 140  # characters of a title shown in tables and lists of other errors
TOP_TYPES = 10  # exception types the home page lists
NAV_JSON = "generated/nav.json"

# --- escaping: one filter per output context; every value from scanned code passes through one -----

# Characters YAML cannot hold as they are, or reads as line breaks (NEL, LS, PS): written as \u escapes.
_YAML_UNSAFE = re.compile("[^\x09\x0a\x0d\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def fenced(text: str, info: str = "") -> str:
    """A fenced code block holding `text` line for line, its fence longer than any backtick run inside."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text.rstrip(chr(10))}\n{fence}"


def url(text: object, safe: str = "/") -> str:
    """A URL path or query part: everything but unreserved characters (and `safe`) percent-encoded."""
    return quote(str(text), safe=safe)


def yaml_string(text: object) -> str:
    """A double-quoted YAML scalar: JSON's string syntax is YAML's, once non-printable characters are escaped."""
    return _YAML_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", json.dumps(str(text), ensure_ascii=False))


def meta(text: object) -> str:
    """A front-matter value that the theme inserts into HTML unescaped (title, description): escaped, then YAML."""
    return yaml_string(html.escape(fold(text), quote=True))


def attr(text: object) -> str:
    """An HTML attribute value, for the raw HTML the templates write."""
    return html.escape(fold(text), quote=True)


def lang(text: object) -> str:
    """A highlighting language name as a fence's info string takes it."""
    return re.sub(r"[^\w+-]", "", str(text)) or "text"


# --- content: small pure functions that turn model values into Markdown (escaped inside) ----------


def shorten(text: str, width: int = LISTED_TITLE) -> str:
    text = fold(text)
    return text if len(text) <= width else text[: width - 1].rstrip() + "…"


def short_name(qualname: str) -> str:
    """`vllm.exceptions.VLLMValidationError` -> `VLLMValidationError`; unions keep their parts."""
    if not is_dotted(qualname):
        return qualname
    return " | ".join(part.strip().rpartition(".")[2] for part in qualname.split("|"))


def is_dotted(qualname: str) -> bool:
    """A class name (or union of them), as opposed to an expression the exception is computed from."""
    return re.fullmatch(r"[A-Za-z_][\w.]*( \| [A-Za-z_][\w.]*)*", qualname) is not None


def is_builtin_exception(name: str) -> bool:
    obj = getattr(builtins, name, None)
    return isinstance(obj, type) and issubclass(obj, BaseException)


def class_chain(hierarchy: Iterable[str]) -> tuple[str, ...]:
    """The record's hierarchy, continued through a built-in's bases up to `Exception` (or `BaseException`)."""
    chain = list(hierarchy)
    if chain and is_builtin_exception(chain[-1]):
        for base in getattr(builtins, chain[-1]).__mro__[1:]:
            if base is object or chain[-1] == "Exception":
                break
            chain.append(base.__name__)
    return tuple(chain)


def hierarchy(names: Iterable[str]) -> str:
    """`VLLMValidationError → VLLMClientError → …`, each class's qualified name on hover."""
    return " → ".join(f'<code title="{attr(name)}">{md(short_name(name))}</code>' for name in class_chain(names))


def condition(c: Condition) -> str:
    """One guard condition as a Markdown list item's text: where, which statement, what must hold."""
    test = code(one_line(c.code))
    where = f"line {c.line}: " if c.line > 0 else ""
    if c.kind == "except":
        return f"{where}inside {code('except ' + one_line(c.code))}"
    if c.kind == "for":
        return f"{where}inside the loop {code('for ' + one_line(c.code))}"
    if c.kind == "case":
        return f"{where}{code('case')} {test}"
    if c.kind == "assert":
        return f"{where}{code('assert')} {test} fails: it must be **false**"
    if c.kind == "else":
        return f"{where}{code('else')} branch: {test} must be **false**"
    truth = "**true**" if c.holds else "**false**"
    if c.kind == "exit":  # an earlier `if` whose body returns, breaks or continues
        return f"{where}{code('if')} {test} must be {truth}, or the code leaves before the raise"
    return f"{where}{code(c.kind)} {test} must be {truth}"


def assignments_source(site: RaiseSite) -> str:
    """The assignments a site's guard reads, as Python with each one's line number above it."""
    return "\n".join(f"# line {a.line}\n{a.code}" for a in site.assignments)


def code_block(site: RaiseSite) -> str:
    """The code around a site, numbered as in the file, the raise statement highlighted."""
    first = site.line - site.code.first_line + 1
    last = site.end_line - site.code.first_line + 1
    lines = f"{first}" if last <= first else f"{first}-{last}"
    return fenced(site.code.text, f'python linenums="{site.code.first_line}" hl_lines="{lines}"')


def blob_link(repository: str, commit: str, site: RaiseSite | SiteRef) -> str:
    return f"https://github.com/{url(repository)}/blob/{url(commit)}/{url(site.path)}#L{site.line}-L{site.end_line}"


def permalink(site: RaiseSite, snapshot: Snapshot) -> str:
    return blob_link(snapshot.repository, snapshot.upstream_commit, site)


def commit_link(snapshot: Snapshot) -> str:
    return f"https://github.com/{url(snapshot.repository)}/commit/{url(snapshot.upstream_commit)}"


def short_commit(snapshot: Snapshot) -> str:
    return snapshot.upstream_commit[:10]


def release(snapshot: Snapshot) -> str:
    return snapshot.version or snapshot.ref


def where(site: RaiseSite | SiteRef, under: str = "") -> str:
    """`path:line`, the path relative to `under` when it lies there."""
    path = site.path[len(under) :] if under and site.path.startswith(under) else site.path
    return f"{path}:{site.line}"


def path_code(text: str) -> str:
    """A path as inline code that may wrap after a slash, for narrow table columns (HTML inside Markdown)."""
    return f"<code>{md(text).replace('/', '/<wbr>')}</code>"


def site_title(site: RaiseSite) -> str:
    """A folded site's one-line title, as Markdown."""
    return f"{code(where(site))} in {code(site.function)}"


def note(text: str | None) -> str:
    """The scanner's note on a message (plain words around one `code` part) as Markdown."""
    if not text:
        return ""
    m = re.fullmatch(r"(.*?)(\s?)`(.*)`(\s?)(.*)", fold(text))
    if not m:
        return md(text)
    before, space, inner, after, rest = m.groups()
    return f"{md(before)}{space}{code(inner)}{after}{md(rest)}"


def prose(text: str) -> str:
    """Words from the code (a docstring) as Markdown: its `code` and ``code`` parts as code spans, the rest literal."""
    out, at = [], 0
    text = fold(text)
    for m in re.finditer(r"``(.+?)``|`([^`]+)`", text):
        out += [md_escape(text[at : m.start()]), code(m.group(1) or m.group(2))]
        at = m.end()
    return "".join(out + [md_escape(text[at:])])


def article(word: str) -> str:
    return "An" if re.match(r"(?i)[aeio]|un", word) else "A"


def derived_summary(record: ErrorRecord, as_markdown: bool = True) -> str:
    """One sentence from the code alone, for errors nobody has explained yet: Markdown, or plain text."""
    lit, text = (code, md) if as_markdown else (str, str)
    first = record.sites[0]
    name = short_name(record.exception) if is_dotted(record.exception) else first.exception.written
    more = len(record.sites) - 1
    places = f" and {more} other place{'s' if more > 1 else ''}" if more else ""
    if record.kind == "assert":
        return f"An {lit('assert')} that fails in {lit(first.function)}{places} ({text(record.subsystem)})."
    return f"{article(name)} {lit(name)} raised in {lit(first.function)}{places} ({text(record.subsystem)})."


def first_sentence(markdown: str) -> str:
    """The first sentence of a Markdown paragraph: up to a full stop and a space, past abbreviations like "e.g."."""
    text = fold(markdown)
    # A cut inside a code span would leave it open and turn the rest into live Markdown (and HTML).
    spans = [m.span() for m in _CODE_SPAN.finditer(text)]
    for m in re.finditer(r"[.!?](?= )", text):
        if any(start <= m.start() < end for start, end in spans):
            continue
        if not re.search(r"(?i)\b(e\.g|i\.e|etc|vs|cf)$", text[: m.start()]):
            return text[: m.end()]
    return text


_CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`).*?(?<!`)\1(?!`)")


def plain(markdown: str) -> str:
    """Markdown reduced to its words: links to their text, code marks and strong emphasis dropped."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", fold(markdown))
    return re.sub(r"`+|\*\*|__", "", text)


def summary(record: ErrorRecord) -> str:
    """The line under the title (Markdown): the meaning's first sentence, else what the code says."""
    if record.annotation.meaning:
        return first_sentence(record.annotation.meaning)
    return derived_summary(record)


def description(record: ErrorRecord) -> str:
    """The page's one-line description, plain text (the `meta` filter escapes it)."""
    if record.annotation.meaning:
        return shorten(plain(first_sentence(record.annotation.meaning)), 200)
    return shorten(derived_summary(record, as_markdown=False), 200)


_SOURCES = {"derived": "Derived from the code.", "curated": "Curated by hand.", "ai": "AI-assisted: check it against the code."}


def source_note(annotation: Annotation, name: str) -> str:
    """Where an annotation field's text came from, as a small HTML line kept out of search; empty when unknown."""
    source = annotation.sources.get(name)
    if source not in _SOURCES:
        return ""
    return f'<p class="ve-source" data-search-exclude>{_SOURCES[source]}</p>'


def report_url(record: ErrorRecord, report_repo: str) -> str:
    """A new-issue form on GitHub, filled in with what names this page."""
    snap = record.snapshot
    title = f"Error page {record.id}: {shorten(record.title, 80)}"
    body = (
        f"Error: {record.id}\nTitle: {record.title}\nPage: {record.url}\n"
        f"Source: {snap.repository}@{snap.upstream_commit} ({release(snap)})\n\nWhat is wrong on the page:\n"
    )
    return f"https://github.com/{url(report_repo)}/issues/new?title={url(title, '')}&body={url(body, '')}"


def search_exclude_if_derived(annotation: Annotation, field: str, anchor: str) -> str:
    """Heading attributes keeping a section out of site search when its text is derived from the code.

    Derived triggers and solutions repeat the code on every page: indexing them took the
    search index of 0.33.0 from 7 MB to 15 MB and adds no words a user searches with.
    """
    return f" {{ #{anchor} data-search-exclude }}" if annotation.sources.get(field) == "derived" else ""


def upstream_issue_url(record: ErrorRecord) -> str:
    """A new-issue form on vLLM's own tracker for an internal error, with what a maintainer will ask for."""
    snap = record.snapshot
    site = record.sites[0]
    title = f"[Bug]: {shorten(record.title, 100)}"
    body = (
        f"vLLM raised an internal error:\n\n    {fold(record.title)}\n\n"
        f"Raised in {site.path}:{site.line} ({site.function}), release {release(snap)}, commit {snap.upstream_commit}.\n\n"
        "Full traceback:\n\n(paste it here)\n\nHow vLLM was started (command or code), GPU and driver:\n"
    )
    return f"https://github.com/{url(snap.repository)}/issues/new?title={url(title, '')}&body={url(body, '')}"


# --- releases ----------------------------------------------------------------------------------------


def release_ranges(history: ErrorHistory, refs: tuple[str, ...]) -> str:
    """The covered releases an error is in, as runs: "v0.24.0 – v0.27.1, v0.30.0 – v0.33.0"."""
    present = {a.ref for a in history.releases}
    runs: list[list[str]] = []
    for i, ref in enumerate(refs):
        if ref in present:
            if runs and i > 0 and refs[i - 1] in present:
                runs[-1].append(ref)
            else:
                runs.append([ref])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]} – {run[-1]}" for run in runs)


def site_permalink(site: SiteRef, appearance: Appearance, repository: str) -> str:
    return blob_link(repository, appearance.commit, site)


def newest_first(history: ErrorHistory) -> list[Appearance]:
    return list(reversed(history.releases))


def report_facts(report: Report) -> str:
    """`vllm-project/vllm#2418, opened 2024-01-11, closed, vLLM 0.2.7`: where a report is and what it says of itself."""
    owner, repo, _, n = report.url.split("/")[3:7]
    facts = [md(f"{owner}/{repo}#{n}")]
    facts += [f"opened {report.opened}"] if report.opened else []
    facts += [report.state] if report.state else []
    facts += [md(f"vLLM {report.version}")] if report.version else []
    return ", ".join(facts)


_TITLE_TAGS = re.compile(r"(\s*\[[^\]]*\]\s*:?)*\s*")


def thread_title(title: str) -> str:
    """A thread's title as a link's text; one that is only its form's tag (`[Bug]:`, left as the form filled it in)
    says so, rather than read as a stray tag before the repository."""
    return title if not _TITLE_TAGS.fullmatch(title) else f"{title.strip()} (no title)".lstrip()


def number(n: int) -> str:
    return f"{n:,}"


def plural(n: int, word: str) -> str:
    return f"{number(n)} {word}{'' if n == 1 else 's'}"


# --- grouping: which index pages exist and what each lists ------------------------------------------


@dataclass(frozen=True)
class Group:
    """One index page: a subsystem, an exception type, or a family of rare types."""

    slug: str  # file name under its folder, without `.md`
    title: str  # as headings and the nav show it
    records: tuple[ErrorRecord, ...]  # in the order the page lists them
    types: tuple[str, ...] = ()  # the exception types the page lists, sorted
    section: str = ""  # the nav section it sits under; "" at the top of its tab
    nav_title: str = ""  # shorter title for the nav; "" means `title`


def package(subsystem: str) -> str:
    """`distributed/kv_transfer` -> `vllm/distributed/kv_transfer/`; the `vllm` subsystem is `vllm/` itself."""
    return "vllm/" if subsystem == "vllm" else f"vllm/{subsystem}/"


RESERVED_PAGES = frozenset({"", "index"})  # page names no subsystem or type gets: `index` is each folder's overview


def _escaped(text: str, plain: str) -> str:
    """`text` with each character outside the regex class `plain` written `~xx`, one per UTF-8 byte.

    The escape is injective and its output has no capitals, so two names never share a file
    name, even on a file system that ignores case.
    """
    return "".join(c if re.fullmatch(plain, c) else "".join(f"~{b:02x}" for b in c.encode("utf-8", "surrogatepass")) for c in text)


def _unreserved(slug: str, reserved: frozenset[str] = RESERVED_PAGES) -> str:
    """A reserved page name with a `~` appended: no escape ends in a bare `~`, so no other name comes out the same."""
    return f"{slug}~" if slug in reserved else slug


def subsystem_slug(subsystem: str) -> str:
    """`distributed/kv_transfer` -> `distributed-kv_transfer`, a page name no other subsystem gets.

    Folders join with `-`; any other character than a-z, 0-9 and `_` is escaped (`a-b` is `a~2db`,
    so it stays apart from `a/b`), and the subsystem `index` is `index~`, apart from the overview.
    """
    return _unreserved("-".join(_escaped(part, "[a-z0-9_]") for part in subsystem.split("/")))


def subsystem_groups(records: Iterable[ErrorRecord]) -> list[Group]:
    """One page per subsystem, its errors in file order; nav sections by top-level package."""
    by: dict[str, list[ErrorRecord]] = defaultdict(list)
    for r in records:
        by[r.subsystem].append(r)
    tops = defaultdict(int)
    for name in by:
        tops[name.split("/")[0]] += 1
    groups = []
    for name in sorted(by):
        top, _, rest = name.partition("/")
        shared = tops[top] > 1
        groups.append(
            Group(
                slug=subsystem_slug(name),
                title=name,
                records=tuple(sorted(by[name], key=lambda r: (r.sites[0].path, r.sites[0].line, r.id))),
                section=top if shared else "",
                nav_title=(rest or f"{top} (top level)") if shared else name,
            )
        )
    return groups


_FAMILIES = (
    ("builtin", "other-builtin", "Other built-in exceptions"),
    ("vllm", "other-vllm", "Other vLLM exceptions"),
    ("other", "other-exceptions", "Other and computed exceptions"),
)


FAMILY_PAGES = frozenset(slug for _, slug, _ in _FAMILIES)  # reserved: type_slug never gives these


def type_family(exception: str) -> str:
    if not is_dotted(exception):
        return "other"
    parts = [p.strip() for p in exception.split("|")]
    if all(p.startswith("vllm.") for p in parts):
        return "vllm"
    if all(is_builtin_exception(p) for p in parts):
        return "builtin"
    return "other"


def type_slug(exception: str, keep_case: bool = False) -> str:
    """A page name for a class (or union): `vllm.exceptions.vllmerror`, parts joined with `--`; never an overview's.

    ASCII capitals are lowered, so names that differ only in case come out the same; `type_slugs`
    gives those `keep_case`, which escapes the capitals instead. Any other character than a-z, 0-9,
    `_` and `.` is escaped as in `subsystem_slug`.
    """
    def part(name: str) -> str:
        return _escaped(name if keep_case else re.sub("[A-Z]", lambda m: m.group().lower(), name), "[a-z0-9_.]")

    return _unreserved("--".join(part(p.strip()) for p in exception.split("|")), RESERVED_PAGES | FAMILY_PAGES)


def type_slugs(exceptions: Iterable[str]) -> dict[str, str]:
    """Each type's page name: its `type_slug`, but where two differ only in case, each with its capitals escaped.

    An all-lower-case name keeps its page name (escaping changes nothing in it); a name with
    capitals escaped holds a `~` where a lowered name has a letter, so it meets no other.
    """
    lowered = {t: type_slug(t) for t in exceptions}
    shared = Counter(lowered.values())
    return {t: type_slug(t, keep_case=True) if shared[slug] > 1 else slug for t, slug in lowered.items()}


def type_groups(records: Iterable[ErrorRecord]) -> list[Group]:
    """A page per exception type with TYPE_PAGE_MIN errors or more, most errors first; rarer types share a
    page per family (built-in, vLLM's own, the rest)."""
    by: dict[str, list[ErrorRecord]] = defaultdict(list)
    for r in records:
        by[r.exception].append(r)
    own = sorted((t for t in by if is_dotted(t) and len(by[t]) >= TYPE_PAGE_MIN), key=lambda t: (-len(by[t]), t))
    shorts = [short_name(t) for t in own]
    slugs = type_slugs(own)

    def listed(rs: Iterable[ErrorRecord]) -> tuple[ErrorRecord, ...]:
        return tuple(sorted(rs, key=lambda r: (r.exception, fold(r.title), r.id)))

    groups = [
        Group(slug=slugs[t], title=short_name(t) if shorts.count(short_name(t)) == 1 else t, records=listed(by[t]), types=(t,))
        for t in own
    ]
    rest: dict[str, list[ErrorRecord]] = defaultdict(list)
    for t in sorted(set(by) - set(own)):
        rest[type_family(t)].extend(by[t])
    groups += [
        Group(slug=slug, title=title, records=listed(rest[family]), types=tuple(sorted({r.exception for r in rest[family]})))
        for family, slug, title in _FAMILIES
        if rest[family]
    ]
    return groups


def type_page_of(groups: list[Group]) -> dict[str, str]:
    """Exception -> the slug of the page that lists it."""
    return {r.exception: g.slug for g in groups for r in g.records}


def most_reported(records: list[ErrorRecord], by_id: dict[str, ErrorRecord]) -> list[ErrorRecord]:
    """The errors with public reports, most reported first; an error reworded since counts on its successor's page."""
    def counted_later(r: ErrorRecord) -> bool:
        return bool(r.history and r.history.superseded_by in by_id)

    shown = [r for r in records if r.reports and not counted_later(r)]
    return sorted(shown, key=lambda r: (-len(r.reports), r.history is not None and r.history.status == "removed", r.id))


def nav(subsystems: list[Group], types: list[Group], snapshot: Snapshot, releases: tuple[ReleaseNotes, ...] = ()) -> dict:
    """What the mkdocs hook appends to the nav: the two index tabs (error pages stay out of the nav)."""
    subsystem_items: list = ["subsystems/index.md"]
    sections: dict[str, list] = {}
    for g in subsystems:
        item = {html.escape(g.nav_title or g.title): f"subsystems/{g.slug}.md"}
        if g.section:
            if g.section not in sections:
                sections[g.section] = []
                subsystem_items.append({html.escape(g.section): sections[g.section]})
            sections[g.section].append(item)
        else:
            subsystem_items.append(item)
    type_items: list = ["types/index.md"] + [{html.escape(g.title): f"types/{g.slug}.md"} for g in types]
    return {
        "generated": f"by vllm-errors from {snapshot.repository}@{snapshot.upstream_commit} ({release(snapshot)}); do not edit",
        "nav": [{"Most reported": "reported.md"}, {"Errors by subsystem": subsystem_items}, {"Errors by type": type_items}]
        + ([{"Releases": ["releases/index.md"] + [{n.ref: f"releases/{n.ref}.md"} for n in reversed(releases)]}] if releases else []),
    }


# --- pages -------------------------------------------------------------------------------------------


def header(snapshot: Snapshot) -> str:
    """The line every generated page opens with (a YAML comment in its front matter)."""
    return (
        f"Generated by vllm-errors from {snapshot.repository} {release(snapshot)} "
        f"(upstream commit {snapshot.upstream_commit}, scanned commit {snapshot.commit[:12]}). "
        "Do not edit: the pipeline rewrites it."
    )


FILTERS = {
    f.__name__: f
    for f in (
        fold, md, code, fenced, url, yaml_string, meta, attr, lang,
        shorten, short_name, hierarchy, one_line, condition, assignments_source, code_block,
        permalink, commit_link, short_commit, release, where, path_code, site_title, note, prose, summary, description,
        source_note, search_exclude_if_derived, shown_template, report_url, upstream_issue_url, number, plural, package, subsystem_slug,
        release_ranges, site_permalink, newest_first, report_facts, thread_title,
    )
}  # fmt: skip


def make_environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=False,  # Markdown, not HTML: each value is escaped by the filter of its context
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        extensions=["jinja2.ext.do"],
    )
    env.filters.update(FILTERS)
    return env


def render_pages(kb: KnowledgeBase, report_repo: str = "vllm-errors/vllm-errors") -> dict[str, str]:
    """Every generated Markdown page, keyed by its path relative to the mkdocs docs_dir, plus "generated/nav.json"."""
    env = make_environment()
    snapshot = kb.snapshot
    every = sorted(kb.records, key=lambda r: r.id)
    by_id = {r.id: r for r in every}
    # Indexes list the newest release's errors; an error it lacks keeps its page, linked from the release notes.
    records = [r for r in every if r.history is None or r.history.status == "current"]
    subsystems = subsystem_groups(records)
    types = type_groups(records)
    type_pages = type_page_of(types)
    refs = kb.history.refs if kb.history else ()
    common = {
        "snapshot": snapshot,
        "header": header(snapshot),
        "type_pages": type_pages,
        "subsystem_pages": {g.slug for g in subsystems},
        "refs": refs,
        "by_id": by_id,
    }
    pages: dict[str, str] = {}
    sources: dict[str, str] = {}  # by lower-case path: on a file system that ignores case, `A.md` is `a.md`

    def add(path: str, source: str, text: str) -> None:
        """One page; a second page at the same path is a bug in the page names, never an overwrite."""
        if path.lower() in sources:
            raise RuntimeError(f"internal error: {sources[path.lower()]} and {source} both render to {path}")
        pages[path], sources[path.lower()] = text, source

    error = env.get_template("error.md.jinja2")
    for r in every:
        related = [by_id[i] for i in r.related if i in by_id]
        add(f"errors/{r.id}.md", f"error {r.id}", error.render(
            common, record=r, related=related, report_repo=report_repo, sites_in_full=SITES_IN_FULL
        ))

    index = env.get_template("index.md.jinja2")
    groups = env.get_template("groups.md.jinja2")
    add("subsystems/index.md", "the subsystems overview", groups.render(common, kind="subsystem", groups=subsystems, total=len(records)))
    for g in subsystems:
        add(f"subsystems/{g.slug}.md", f"subsystem {g.title!r}", index.render(common, kind="subsystem", group=g))
    add("types/index.md", "the types overview", groups.render(common, kind="type", groups=types, total=len(records), type_page_min=TYPE_PAGE_MIN))
    for g in types:
        add(f"types/{g.slug}.md", f"the type page {g.title!r}", index.render(common, kind="type", group=g))

    add("index.md", "the home page", env.get_template("home.md.jinja2").render(
        common,
        errors=len(records),
        sites=sum(len(r.sites) for r in records),
        files=kb.files,
        top_types=[g for g in types if g.slug not in FAMILY_PAGES][:TOP_TYPES],
        history=kb.history,
    ))
    reported = most_reported(every, by_id)
    add("reported.md", "the most reported errors", env.get_template("reported.md.jinja2").render(
        common, reported=reported, total=sum(len(r.reports) for r in reported)))
    notes = kb.history.notes if kb.history else ()
    if notes:
        release_page = env.get_template("release.md.jinja2")
        add("releases/index.md", "the releases overview", env.get_template("releases.md.jinja2").render(common, notes=list(reversed(notes))))
        for n in notes:
            add(f"releases/{n.ref}.md", f"the notes of release {n.ref!r}", release_page.render(common, notes=n))
    add(NAV_JSON, "the nav", json.dumps(nav(subsystems, types, snapshot, notes), indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return dict(sorted(pages.items()))


def render_agent_files(kb: KnowledgeBase, base: str) -> dict[str, str]:
    """The files agents read, put into the built site beside the pages: each error page's Markdown twin
    (errors/<id>.md), llms.txt (llmstxt.org) and llms-full.txt (the twins of the errors with a curated note or
    a public report, most reported first). `base` is the published site's URL, which their links name."""
    env = make_environment()
    every = sorted(kb.records, key=lambda r: r.id)
    by_id = {r.id: r for r in every}
    common = {"snapshot": kb.snapshot, "refs": kb.history.refs if kb.history else (), "by_id": by_id, "base": base}
    twin = env.get_template("twin.md.jinja2")
    files = {f"errors/{r.id}.md": twin.render(common, record=r) for r in every}
    current = [r for r in every if r.history is None or r.history.status == "current"]
    full = sorted((r for r in current if r.reports or "curated" in r.annotation.sources.values()), key=lambda r: (-len(r.reports), r.id))
    files["llms-full.txt"] = "\n\n".join(files[f"errors/{r.id}.md"].rstrip("\n") for r in full) + "\n"
    files["llms.txt"] = env.get_template("llms.txt.jinja2").render(
        common, errors=len(current), reported=most_reported(every, by_id), full=len(full))
    return files
