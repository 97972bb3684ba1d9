"""Refreshing the public reports from GitHub's issue search API: for each error new or changed since the last refresh,
search issues for its message's longest literal text, and keep each thread whose text the lookup answers with that
error, as a candidate for someone to confirm (annotations/reports/candidates/<id>.yaml; the pages ignore candidates
until a person moves them into annotations/reports/<id>.yaml, saying how the paste matches).
"""

from __future__ import annotations

import datetime
import json
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from tqdm import tqdm

from . import lookup
from .messages import parts_of_template
from .model import ErrorRecord, KnowledgeBase, Report, UserError
from .reports import CANDIDATES, dump_reports, load_reports, parse_reports

API_URL = "https://api.github.com"
TOKEN_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN")
STATE_FILE = "refreshed.json"  # the release last refreshed and the errors searched for
MIN_LITERAL = 24  # characters of a message's longest literal text: shorter ones find too many threads that are not it
MAX_QUERY = 250  # GitHub refuses a search query of over 256 characters
PER_ERROR = 20  # threads read per error
MIN_INTERVAL = 2.1  # seconds between searches: GitHub allows 30 a minute with a token
MAX_WAIT = 3600  # seconds: a rate limit that resets later than this stops the refresh


def token_from(environ) -> str:
    for name in TOKEN_VARIABLES:
        if environ.get(name, "").strip():
            return environ[name].strip()
    raise UserError("GITHUB_TOKEN is not set: the refresh searches GitHub's issue search API, which needs a token "
                    "(one with no permissions will do); without it, the reports in annotations/reports/ are used as they are")


@dataclass
class GitHub:
    """GitHub's issue search, within its rate limits: a pause between searches, and a wait until the limit resets
    when GitHub says it is spent (a 403 or 429 with X-RateLimit-Remaining: 0 or Retry-After)."""

    token: str
    api_url: str = API_URL
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.time
    min_interval: float = MIN_INTERVAL
    timeout: float = 30.0
    requests: int = 0
    waited: float = 0.0
    _last: float = field(default=float("-inf"), repr=False)

    def search(self, query: str, per_page: int = PER_ERROR) -> list[dict]:
        url = f"{self.api_url.rstrip('/')}/search/issues?" + urllib.parse.urlencode({"q": query, "per_page": per_page})
        for _ in range(4):
            self._pause(self.min_interval - (self.clock() - self._last))
            self._last = self.clock()
            self.requests += 1
            request = urllib.request.Request(url, headers={
                "Authorization": f"Bearer {self.token}", "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": "2022-11-28", "User-Agent": "vllm-errors",
            })
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    items = json.loads(response.read().decode("utf-8")).get("items", [])
                    if response.headers.get("X-RateLimit-Remaining") == "0":
                        self._pause(self._reset_in(response.headers))
                    return items
            except urllib.error.HTTPError as e:
                if e.code == 401:
                    raise UserError(f"GitHub refused the token (401 from {self.api_url}): check GITHUB_TOKEN") from None
                if e.code in (403, 429) and (e.headers.get("Retry-After") or e.headers.get("X-RateLimit-Remaining") == "0"):
                    self._pause(self._reset_in(e.headers))
                    continue
                if e.code == 422:  # a query GitHub cannot run (too long, odd characters): no threads for it
                    return []
                raise UserError(f"GitHub's issue search answered {e.code} {e.reason}: try again later") from None
            except urllib.error.URLError as e:
                raise UserError(f"cannot reach {self.api_url} ({e.reason}): the refresh needs network access to GitHub; "
                                "without it, the reports in annotations/reports/ are used as they are") from None
            except (TimeoutError, OSError) as e:
                raise UserError(f"cannot reach {self.api_url} ({e}): the refresh needs network access to GitHub") from None
        raise UserError("GitHub's rate limit is still spent after waiting three times: run the refresh again later")

    def _reset_in(self, headers) -> float:
        if headers.get("Retry-After"):
            return float(headers["Retry-After"])
        return float(headers.get("X-RateLimit-Reset") or self.clock() + 60) - self.clock() + 1

    def _pause(self, seconds: float) -> None:
        if seconds > MAX_WAIT:
            raise UserError(f"GitHub's rate limit resets in {seconds / 60:.0f} minutes: run the refresh again then")
        if seconds > 0:
            self.waited += seconds
            self.sleep(seconds)


def query_for(record: ErrorRecord) -> str | None:
    """The search for an error's threads: its message's longest literal text, quoted, in issues; None when the
    message has no literal text long enough to tell its threads from others."""
    if not record.template:
        return None
    literals = [" ".join(text.replace('"', " ").split()) for hole, text in parts_of_template(record.template) if not hole]
    longest = max(literals, key=len, default="")
    if len(longest) < MIN_LITERAL:
        return None
    return f'"{longest[: MAX_QUERY - 20].rsplit(" ", 1)[0] if len(longest) > MAX_QUERY - 20 else longest}" is:issue'


def matches(prepared: lookup.Prepared, record: ErrorRecord, item: dict) -> bool:
    """Whether the lookup answers the thread's title and first post with this error first, its message's literal text
    all there in order (or with high confidence): a thread that only shares words with it is not a report of it."""
    text = f"{item.get('title') or ''}\n{item.get('body') or ''}"
    answer = lookup.answer(prepared, lookup.read_paste(text))
    top = answer.finding.matches[0] if answer.finding and answer.finding.matches else None
    return bool(top and top.id == record.id and (top.how == "exact" or top.confidence == "high"))


def candidate(item: dict, record: ErrorRecord, ref: str, today: str) -> Report:
    return Report(
        url=item["html_url"],
        title=" ".join((item.get("title") or "").split()) or item["html_url"],
        checked=f"found by vllm-errors refresh on {today}: the lookup answers the thread's first post with this error "
                f"of {ref}; read the thread, then say here how its paste matches",
        opened=(item.get("created_at") or "")[:10] or None,
        state=item.get("state") if item.get("state") in ("open", "closed") else None,
        release=ref,
        error=record.id,
    )


@dataclass(frozen=True)
class Refreshed:
    searched: int  # errors searched for
    skipped: int  # errors whose message has too little literal text to search for
    candidates: int  # new candidate threads written
    requests: int
    waited: float  # seconds spent waiting on the rate limit


def refresh(kb: KnowledgeBase, reports_dir: Path, client: GitHub, progress: bool | None = None,
            today: str | None = None, limit: int | None = None) -> Refreshed:
    """Search for the errors of `kb`'s release that the last refresh did not search for (new, or reworded since)."""
    today = today or datetime.date.today().isoformat()
    state_path = reports_dir / STATE_FILE
    state = json.loads(state_path.read_text(encoding="utf-8")) if state_path.is_file() else {"errors": []}
    done = set(state.get("errors", ()))
    confirmed = {r.url for reports in load_reports(reports_dir).values() for r in reports}
    todo = [r for r in kb.records if r.id not in done and (r.history is None or r.history.status == "current")]
    todo = todo[:limit] if limit is not None else todo
    prepared = lookup.prepare(lookup.build_index(kb))
    candidates_dir = reports_dir / CANDIDATES
    searched = skipped = found = 0
    for record in tqdm(todo, unit="error", desc="searching GitHub", disable=None if progress is None else not progress):
        query = query_for(record)
        done.add(record.id)
        if query is None:
            skipped += 1
            continue
        searched += 1
        items = [i for i in client.search(query) if i.get("html_url") and "/pull/" not in i["html_url"]]
        new = [candidate(i, record, kb.snapshot.ref, today) for i in items if i["html_url"] not in confirmed and matches(prepared, record, i)]
        if new:
            path = candidates_dir / f"{record.id}.yaml"
            old = parse_reports(str(path), path.read_bytes(), record.id) if path.is_file() else ()
            known = {r.url for r in old}
            fresh = [r for r in new if r.url not in known]
            if fresh:
                candidates_dir.mkdir(parents=True, exist_ok=True)
                path.write_text(dump_reports(record.title, [*old, *fresh]), encoding="utf-8")
                found += len(fresh)
        _save_state(state_path, kb.snapshot.ref, done)  # after each error: an interrupted refresh resumes where it stopped
    _save_state(state_path, kb.snapshot.ref, done)
    return Refreshed(searched, skipped, found, client.requests, client.waited)


def _save_state(path: Path, ref: str, done: set[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"release": ref, "errors": sorted(done)}, indent=0) + "\n", encoding="utf-8")

