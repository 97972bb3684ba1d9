"""The project's vocabulary: every value that crosses a stage boundary, and its JSON form."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import Field, TypeAdapter


class UserError(Exception):
    """A mistake in what the user asked for: shown as one line, never as a traceback."""


@dataclass(frozen=True)
class Snapshot:
    repository: str  # GitHub slug the pages link to, e.g. "vllm-project/vllm"
    ref: str  # what was asked for: a tag, branch or commit
    commit: str  # full id of the commit that was scanned
    date: str  # the commit's date, ISO 8601 in UTC
    upstream_commit: str  # what permalinks point at: vllm/_version.py's commit in release mirrors (the release's
    # tag where its source distribution records none), else `commit`
    version: str | None = None  # vLLM's version as recorded in vllm/_version.py


@dataclass(frozen=True)
class SourceFile:
    path: str  # path inside the repository, with forward slashes
    blob: str  # git blob id: the cache key of the file's scan
    data: bytes  # the file's bytes, straight from the object database


@dataclass(frozen=True)
class Condition:
    kind: Literal["if", "elif", "else", "exit", "while", "for", "except", "case", "assert"]
    # "exit": an earlier `if` in an enclosing block whose body returns, breaks or continues
    code: str  # the test's source text; for `except`, the caught types; for `for`, "x in xs"
    holds: bool  # True: the raise needs `code` to be true; False: it needs `code` to be false
    line: int  # where the test is written


@dataclass(frozen=True)
class Assignment:
    name: str  # the name that a guard reads
    code: str  # the whole assignment, as written
    line: int


@dataclass(frozen=True)
class ExceptionRef:
    written: str  # as in the code: "ValueError", "errors.Invalid", "self._make_error(...)"
    qualname: str  # resolved through imports: "vllm.exceptions.VLLMValidationError"; "" when unknown
    how: Literal["call", "name", "reraise", "instance", "factory", "assert"]


@dataclass(frozen=True)
class Message:
    template: str | None  # literal text with "{expr}" per placeholder and literal braces doubled; None when none can be built
    placeholders: tuple[str, ...]  # each placeholder's expression, in order
    form: str  # how the code builds it: literal, concat, fstring, plus, percent, format, variable, constant, empty, dynamic
    pattern: str | None  # a regular expression matching the formatted message, with groups p0, p1, ...
    note: str | None = None  # why there is no template
    variants: tuple[str, ...] = ()  # templates of the other messages the code can build: text set in branches,
    # appended only sometimes, or reasons joined from a list (what lookup matches besides the template)


@dataclass(frozen=True)
class Code:
    first_line: int  # line number of the first line of `text` in the file
    text: str  # the lines around the site, exactly as written


@dataclass(frozen=True)
class RaiseSite:
    path: str
    line: int  # first line of the raise or assert statement
    end_line: int
    function: str  # enclosing qualified name inside the module ("Class.method", "outer.inner"), "<module>" at top level
    function_doc: str | None  # the first paragraph of the enclosing function's docstring
    kind: Literal["raise", "assert"]
    exception: ExceptionRef
    message: Message
    guard: tuple[Condition, ...]  # outermost first: what must hold, from the function body down to the raise
    assignments: tuple[Assignment, ...]  # where the guard's names come from, in source order
    cause: str | None  # the `from` expression
    code: Code


@dataclass(frozen=True)
class ExceptionClass:
    qualname: str  # "vllm.exceptions.VLLMValidationError"
    name: str
    module: str
    path: str
    line: int
    bases: tuple[str, ...]  # resolved qualified names, as written in the class statement
    doc: str | None = None
    message: Message | None = None  # what `raise Cls()` says: the text its __init__ hands to the base class


@dataclass(frozen=True)
class ConfigField:
    config: str  # the engine config class: "CacheConfig"
    name: str  # "cache_dtype"
    type: str  # the annotation as written: "CacheDType | str"
    default: str | None  # the default's source text: '"auto"'
    choices: tuple[str, ...]  # allowed values from Literal[...] types, as source text
    doc: str | None  # the field's docstring
    path: str
    line: int


@dataclass(frozen=True)
class Flag:
    flags: tuple[str, ...]  # as declared: ("--tensor-parallel-size", "-tp")
    config: str  # "ParallelConfig"; "" for a flag that sets no engine config field
    field: str  # "tensor_parallel_size"; "" likewise
    path: str
    line: int


@dataclass(frozen=True)
class EnvVar:
    name: str  # "VLLM_USE_V1"
    doc: str | None  # the comment block above its declaration
    default: str | None  # the default given to os.getenv, as source text
    path: str
    line: int


@dataclass(frozen=True)
class Problem:
    path: str
    kind: Literal["syntax", "encoding", "size", "depth", "crash"]  # depth: refused, deeper than the parser is safe on
    detail: str
    line: int = 0  # where in the file, when one line is to blame


@dataclass(frozen=True)
class AttributeFact:
    """`self.block_size = cache_config.block_size` in a method: where an attribute a guard reads comes from.

    A fact of the program model, linked per release: only values that read a setting (a `*config*`
    object, `envs`, `args`) are kept, which is what reaches the user's levers."""

    cls: str  # the class's qualified name: "vllm.v1.worker.gpu_model_runner.GPUModelRunner"
    attr: str
    value: str  # the value's source text
    line: int


@dataclass(frozen=True)
class ModuleScan:
    path: str
    sites: tuple[RaiseSite, ...] = ()
    classes: tuple[ExceptionClass, ...] = ()  # every class with bases: which are exceptions is known only across modules
    problems: tuple[Problem, ...] = ()
    config_fields: tuple[ConfigField, ...] = ()
    flags: tuple[Flag, ...] = ()
    env_vars: tuple[EnvVar, ...] = ()
    attributes: tuple[AttributeFact, ...] = ()


@dataclass(frozen=True)
class ErrorEntry:
    id: str  # 16 hex characters from (repository, exception, normalized template)
    exception: str  # qualified name of the exception type
    template: str | None
    kind: Literal["raise", "assert"]
    placeholders: tuple[str, ...]
    pattern: str | None
    sites: tuple[RaiseSite, ...]  # sorted by path and line
    variants: tuple[str, ...] = ()  # the sites' other messages (Message.variants), first site first


@dataclass(frozen=True)
class BareAssert:
    """An `assert` without a message: no error of the catalog, but the lookup finds it by its expression."""

    path: str
    line: int  # the `assert` statement's first line
    function: str  # qualified name of the enclosing function ("Class.method"), "" at module level
    expression: str  # facts.assert_key of the tested expression


@dataclass(frozen=True)
class AssertSite:
    """One assert without a message across the releases that have it (same file, function and expression)."""

    path: str
    function: str
    expression: str
    lines: tuple[tuple[str, int], ...]  # (release, line), oldest first


@dataclass(frozen=True)
class Catalog:
    snapshot: Snapshot
    errors: tuple[ErrorEntry, ...]  # sorted by id
    exception_classes: tuple[ExceptionClass, ...]  # sorted by qualname
    problems: tuple[Problem, ...] = ()
    files: int = 0  # Python files scanned
    config_fields: tuple[ConfigField, ...] = ()  # the engine settings, sorted by config and name
    flags: tuple[Flag, ...] = ()  # `vllm serve` flags and the settings they set
    env_vars: tuple[EnvVar, ...] = ()  # VLLM_* environment variables
    attributes: tuple[AttributeFact, ...] = ()  # `self.x = <setting>` in methods, sorted by class, attribute and line
    bare_asserts: tuple[BareAssert, ...] = ()  # sorted by path and line
    # The release's program model (extractor/program.py), in memory only: never written with the catalog.
    program: Annotated[Any, Field(exclude=True)] = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class SiteRef:
    """Where an error is raised in one release: enough to link and to pin a traceback's line."""

    path: str
    line: int
    end_line: int
    function: str


@dataclass(frozen=True)
class Appearance:
    """An error in one release."""

    ref: str  # the release's tag: "v0.28.0"
    commit: str  # the commit permalinks use: the upstream one for a release mirror
    sites: tuple[SiteRef, ...]


@dataclass(frozen=True)
class ErrorHistory:
    releases: tuple[Appearance, ...]  # oldest first; an error may leave and come back
    status: Literal["current", "removed"]  # whether the newest release has it
    removed_in: str | None = None  # the first release without it, after its last appearance
    superseded_by: str | None = None  # the error it was reworded into, in `removed_in`
    supersedes: tuple[str, ...] = ()  # the errors reworded into it


@dataclass(frozen=True)
class ReleaseNotes:
    """What changed in one release's errors since the release before it (direct catalog diffs, not guesses)."""

    ref: str
    date: str
    previous: str | None  # None for the oldest release of the history
    errors: int  # how many errors the release has
    new: tuple[str, ...]  # ids in this release and not in the previous one: `added` and the new side of `reworded`
    gone: tuple[str, ...]  # ids in the previous release and not in this one: `removed` and the old side of `reworded`
    added: tuple[str, ...]  # new ids that reword nothing, in file order
    removed: tuple[str, ...]  # gone ids that nothing rewords, in file order
    reworded: tuple[tuple[str, str], ...]  # (old id, new id): a changed message or exception in the same function, in file order
    moved: tuple[str, ...]  # same error, sites changed (lines or files)
    unchanged: int


@dataclass(frozen=True)
class History:
    refs: tuple[str, ...]  # the releases, oldest first
    notes: tuple[ReleaseNotes, ...]  # one per release, oldest first
    errors: dict[str, ErrorHistory]  # every error of any release, by id
    asserts: tuple[AssertSite, ...] = ()  # the asserts without a message of every release


Source = Literal["derived", "curated", "ai"]
# user: a setting or an input to change; environment: the machine (a package, a file, a device, the network);
# internal: an assumption of vLLM's own, a bug to report; abstract: a method the class in use does not provide
# (a plugin's to implement); control: no failure (a loop, a task or a process ending); unknown: not told by the code.
Kind = Literal["user", "environment", "internal", "abstract", "control", "unknown"]


@dataclass(frozen=True)
class GlossaryTerm:
    term: str  # "MLA"
    pattern: str  # a regular expression that finds the term in messages, guards and paths
    definition: str  # one or two sentences of plain Markdown


@dataclass(frozen=True)
class ExampleFix:
    before: str
    after: str
    language: str  # how to highlight both: "shell", "python", "yaml", ...


@dataclass(frozen=True)
class Annotation:
    """What an error means and what to do about it; text is Markdown, safe to render as is."""

    meaning: str | None = None
    triggers: tuple[str, ...] = ()  # when it happens, in words
    situations: tuple[str, ...] = ()  # common situations that lead there
    solutions: tuple[str, ...] = ()  # most specific first
    example_fix: ExampleFix | None = None
    kind: Kind = "unknown"  # what the user does about it: see Kind
    sources: dict[str, Source] = field(default_factory=dict)  # field name -> where its text came from
    stale: bool = False  # a curated note written against code that has changed since
    # Where every call of the raising function in vLLM catches the error: the messages its handlers log instead (what
    # the user sees), as templates; the lookup finds the error by them too.
    logged: tuple[str, ...] = ()


@dataclass(frozen=True)
class Report:
    """A public report of an error: an issue thread whose paste shows it, matched to the error by someone who read it."""

    url: str
    title: str
    checked: str  # how the match was confirmed: the release, file and line the paste's error comes from
    opened: str | None = None  # the thread's first post, YYYY-MM-DD
    state: Literal["open", "closed"] | None = None
    version: str | None = None  # the vLLM version the reporter ran, where the thread says
    release: str | None = None  # the release whose source the paste was matched against
    resolution: str | None = None  # what resolved it, in one line, where the thread shows it
    wrapped_by: tuple[str, ...] = ()  # the wrapper errors its paste shows after it ("See root cause above"), by id
    error: str = ""  # the id it is filed under: an earlier wording's, when the error was reworded since


@dataclass(frozen=True)
class ErrorRecord:
    """One error as pages and the JSON API show it: the catalog's fields and what was learned about them."""

    id: str
    exception: str
    template: str | None
    kind: Literal["raise", "assert"]
    placeholders: tuple[str, ...]
    pattern: str | None
    sites: tuple[RaiseSite, ...]
    title: str  # "ValueError: MLA only works with naive serde mode.."
    subsystem: str  # package path under vllm/, e.g. "distributed/kv_transfer"
    hierarchy: tuple[str, ...]  # the exception, its base, ... up to a builtin
    annotation: Annotation
    related: tuple[str, ...]  # ids, most related first
    url: str  # the page, relative to the site root: "errors/<id>.html"
    snapshot: Snapshot
    terms: tuple[GlossaryTerm, ...] = ()  # glossary entries for the vLLM terms its message, guard or path mention
    history: ErrorHistory | None = None  # the releases it is in, when the site covers several
    wrapper: Literal["", "points", "embeds"] = ""  # "points": its message only points at an error printed earlier
    # ("See root cause above"); "embeds": it is raised while handling another and carries that one's message
    variants: tuple[str, ...] = ()  # the other messages its code can build (ErrorEntry.variants)
    reports: tuple[Report, ...] = ()  # public reports of it (and of its earlier wordings), newest first
    root_causes: tuple[str, ...] = ()  # for a wrapper: the errors reported behind it, most reported first


@dataclass(frozen=True)
class OutsideError:
    """An error users paste that vLLM's code does not raise (annotations/outside.yaml)."""

    name: str  # "torch-cuda-oom"
    type: str  # a regular expression searched in the pasted type, lower-cased; "" for any
    message: str  # likewise in the message
    says: str  # what it is, in one or two sentences
    see: tuple[str, ...] = ()  # ids of the vLLM errors whose pages cover its usual cause


@dataclass(frozen=True)
class KnowledgeBase:
    snapshot: Snapshot
    records: tuple[ErrorRecord, ...]  # sorted by id
    exception_classes: tuple[ExceptionClass, ...]
    problems: tuple[Problem, ...] = ()
    files: int = 0
    history: History | None = None  # the releases covered, with their notes; None for one release
    outside: tuple[OutsideError, ...] = ()  # errors from outside vLLM the lookup names
    asserts: tuple[AssertSite, ...] = ()  # the asserts without a message, which the lookup finds by expression


@dataclass(frozen=True)
class ScanStats:
    files: int
    cached: int  # files whose scan came from the cache
    sites: int
    errors: int
    problems: int
    seconds: float


_CATALOG = TypeAdapter(Catalog)
_MODULE_SCAN = TypeAdapter(ModuleScan)
_RECORD = TypeAdapter(ErrorRecord)


def record_to_data(record: ErrorRecord) -> dict:
    return _RECORD.dump_python(record, mode="json")


def record_schema() -> dict:
    """JSON Schema of one error record, derived from the dataclasses so the two cannot drift."""
    return _RECORD.json_schema(mode="serialization")


def catalog_to_json(catalog: Catalog) -> str:
    """The catalog as deterministic JSON text: sorted keys, no wall-clock values."""
    return json.dumps(_CATALOG.dump_python(catalog, mode="json"), sort_keys=True, ensure_ascii=False, indent=1) + "\n"


def catalog_from_json(text: str | bytes) -> Catalog:
    return _CATALOG.validate_json(text)


def module_scan_to_json(scan: ModuleScan) -> bytes:
    return _MODULE_SCAN.dump_json(scan)


def module_scan_from_json(data: bytes) -> ModuleScan:
    return _MODULE_SCAN.validate_json(data)
