"""Public reports of errors (annotations/reports/<id>.yaml): issue threads whose paste shows an error, each confirmed by
someone who read it, and how they follow an error through its rewordings.

A file is named after the id of the error as the release the reports were matched against raised it; it holds the
error's title (for people reading it) and its reports. Read strictly, like curated notes: anyone may send one.
Candidates a refresh found and nobody has confirmed yet wait in annotations/reports/candidates/, which pages ignore.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import asdict
from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from .lineage import counted_later, earlier_wordings, later_wordings
from .model import ErrorHistory, Report, UserError
from .notes import ID, _decode, _invalid, _line, _load_yaml, _safe

CANDIDATES = "candidates"  # the folder of reports a refresh found, waiting to be confirmed
_URL = re.compile(r"https://github\.com/[\w.-]+/[\w.-]+/(?:issues|discussions)/\d+")
_FIELDS = "url, title, checked, opened, state, version, release, resolution, wrapped_by"
MAX_RESOLUTION = 200


class _Report(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str
    title: str
    checked: str
    opened: datetime.date | None = None
    state: Literal["open", "closed"] | None = None
    version: str | None = None
    release: str | None = None
    resolution: str | None = None
    wrapped_by: list[str] = []

    @field_validator("wrapped_by")
    @classmethod
    def _ids(cls, ids: list[str]) -> list[str]:
        if any(not ID.fullmatch(i) for i in ids):
            raise ValueError("lists an error id that is not 16 hex digits")
        return ids

    @field_validator("url")
    @classmethod
    def _an_issue(cls, url: str) -> str:
        if not _URL.fullmatch(url):
            raise ValueError("is not a GitHub issue or discussion address (https://github.com/<owner>/<repo>/issues/<n>)")
        return url

    @field_validator("title", "checked")
    @classmethod
    def _not_empty(cls, text: str) -> str:
        if not text.strip():
            raise ValueError("is empty")
        return text

    @field_validator("resolution")
    @classmethod
    def _one_line(cls, text: str | None) -> str | None:
        if text is not None and ("\n" in text.strip() or len(text) > MAX_RESOLUTION):
            raise ValueError(f"must be one line of at most {MAX_RESOLUTION} characters")
        return text


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")
    error: str  # the error's title, for people reading the file
    reports: list[dict]


def parse_reports(name: str, text: str | bytes, error_id: str) -> tuple[Report, ...]:
    """The reports of one file; a malformed one raises UserError naming the file, the line and the fault."""
    data, node = _load_yaml(name, _decode(name, text), first_line=1)
    try:
        whole = _File.model_validate(data)
    except ValidationError as e:
        raise UserError(_invalid(name, node, 1, e, "error, reports")) from None
    reports, seen = [], {}
    for n, entry in enumerate(whole.reports):
        try:
            r = _Report.model_validate(entry)
        except ValidationError as e:
            first = e.errors()[0]
            loc = ("reports", n, *first["loc"])
            where = ".".join(map(str, first["loc"]))
            raise UserError(f"{name}:{_line(node, loc, 1)}: reports[{n}].{where}: {first['msg']}"
                            + (f": the fields are {_FIELDS}" if first["type"] == "extra_forbidden" else "")) from None
        if r.url in seen:
            raise UserError(f"{name}:{_line(node, ('reports', n), 1)}: {r.url} is listed already at line {seen[r.url]}: keep one entry")
        seen[r.url] = _line(node, ("reports", n), 1)
        reports.append(Report(
            url=r.url, title=r.title.strip(), checked=r.checked.strip(), opened=r.opened.isoformat() if r.opened else None,
            state=r.state, version=r.version, release=r.release,
            resolution=_safe(name, seen[r.url], "resolution", r.resolution.strip()) if r.resolution else None,
            wrapped_by=tuple(r.wrapped_by), error=error_id,
        ))
    return tuple(reports)


def load_reports(directory: Path) -> dict[str, tuple[Report, ...]]:
    """Every file's reports by the id it is named after; absent directory: none."""
    found: dict[str, tuple[Report, ...]] = {}
    if not directory.is_dir():
        return found
    for path in sorted(directory.glob("*.yaml")):
        name = f"annotations/{directory.name}/{path.name}"
        if not ID.fullmatch(path.stem):
            raise UserError(f"{name}: a reports file is named after its error's id (16 hex digits): rename it <id>.yaml")
        found[path.stem] = parse_reports(name, path.read_bytes(), path.stem)
    return found


def along_lineage(reports: dict[str, tuple[Report, ...]], history: dict[str, ErrorHistory] | None) -> dict[str, tuple[Report, ...]]:
    """Each error's reports: its own and those of the wordings it was reworded from (a report of an older message is
    a report of the same error), one per thread, newest first."""
    ids = set(reports) | set(history or ())
    gathered: dict[str, tuple[Report, ...]] = {}
    for error_id in sorted(ids):
        found: dict[str, Report] = {}
        for wording in (error_id, *earlier_wordings(error_id, history)):
            for r in reports.get(wording, ()):
                found.setdefault(r.url, r)
        if found:
            gathered[error_id] = newest_first(found.values())
    return gathered


MAX_ROOT_CAUSES = 10


def root_causes(reports: dict[str, tuple[Report, ...]], history: dict[str, ErrorHistory] | None,
                present: set[str]) -> dict[str, tuple[str, ...]]:
    """For each wrapper error, the errors `present` whose reports show it after them, most reported first: what to look
    for in the log above it. A wrapper reworded since gets its earlier wordings' causes; an error counted on a later
    wording's page (its successor is present) is counted there only."""
    counts: dict[str, dict[str, int]] = {}
    for error_id, found in reports.items():
        if error_id not in present or counted_later(error_id, history, present):
            continue
        for r in found:
            for wrapper in {w for old in r.wrapped_by for w in later_wordings(old, history)}:
                counts.setdefault(wrapper, {}).setdefault(error_id, 0)
                counts[wrapper][error_id] += 1
    return {w: tuple(sorted(c, key=lambda i: (-c[i], i)))[:MAX_ROOT_CAUSES] for w, c in counts.items()}


def newest_first(reports) -> tuple[Report, ...]:
    return tuple(sorted(reports, key=lambda r: (r.opened or "", r.url), reverse=True))


def dump_reports(title: str, reports: tuple[Report, ...] | list[Report]) -> str:
    """A reports file's text, fields in a fixed order, so that a rewrite changes only what changed."""
    entries = []
    for r in sorted(reports, key=lambda r: (r.opened or "", r.url)):
        entry = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(r).items() if k != "error" and v not in (None, ())}
        order = ("url", "title", "opened", "state", "version", "release", "resolution", "wrapped_by", "checked")
        entries.append({k: entry[k] for k in order if k in entry})
    return yaml.safe_dump({"error": title, "reports": entries}, sort_keys=False, allow_unicode=True, width=120)
