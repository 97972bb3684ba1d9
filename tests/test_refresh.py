"""The refresh of public reports, against a local fake of GitHub's issue search API."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from vllm_errors import cli
from vllm_errors.model import UserError
from vllm_errors.refresh import GitHub, query_for, refresh, token_from
from vllm_errors.reports import load_reports

from fixture_repo import make_repo
from test_render import FULL, MANY, kb

ISSUE = "https://github.com/vllm-project/vllm/issues/{}"


class FakeGitHub:
    """Answers /search/issues from `threads` (query text -> items); the first `limited` searches get a 403 with the
    rate limit spent; every request is recorded."""

    def __init__(self, threads: dict[str, list[dict]], limited: int = 0):
        self.threads, self.limited, self.seen = threads, limited, []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                url = urlparse(self.path)
                fake.seen.append((url.path, parse_qs(url.query), self.headers.get("Authorization")))
                if fake.limited:
                    fake.limited -= 1
                    self.send_response(403)
                    self.send_header("X-RateLimit-Remaining", "0")
                    self.send_header("X-RateLimit-Reset", "1000005")
                    self.end_headers()
                    self.wfile.write(b'{"message": "API rate limit exceeded"}')
                    return
                q = parse_qs(url.query)["q"][0]
                items = next((v for k, v in fake.threads.items() if k in q), [])
                body = json.dumps({"total_count": len(items), "items": items}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("X-RateLimit-Remaining", "29")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def fake():
    servers = []

    def start(threads, limited=0):
        servers.append(FakeGitHub(threads, limited))
        return servers[-1]

    yield start
    for s in servers:
        s.close()


def client(url, clock=None):
    waits = []
    now = [1_000_000.0]

    def sleep(seconds):
        waits.append(seconds)
        now[0] += seconds

    return GitHub("t0ken", api_url=url, sleep=sleep, clock=clock or (lambda: now[0]), min_interval=0), waits


def item(n, title, body, state="open", created="2026-10-01T00:00:00Z"):
    return {"html_url": ISSUE.format(n), "title": title, "body": body, "state": state, "created_at": created}


RECORD = replace(MANY, template="The batch of {size} sequences does not fit in the scheduler's token budget")


def test_a_query_is_the_longest_literal_text_quoted():
    assert query_for(RECORD) == '"sequences does not fit in the scheduler\'s token budget" is:issue'
    assert query_for(replace(RECORD, template="bad {x}")) is None  # too little to tell its threads from others
    assert query_for(replace(RECORD, template=None)) is None


def test_threads_the_lookup_answers_with_the_error_become_candidates_and_others_do_not(fake, tmp_path):
    paste = "Traceback (most recent call last):\nValueError: The batch of 12 sequences does not fit in the scheduler's token budget"
    server = fake({"token budget": [
        item(1, "[Bug]: crash at startup", paste, state="closed", created="2026-09-30T10:00:00Z"),
        item(2, "Unrelated", "ValueError: something else entirely, not this error at all"),
        {**item(3, "a pull request", paste), "html_url": "https://github.com/vllm-project/vllm/pull/3"},
    ]}, limited=1)
    github, waits = client(server.url)
    reports_dir = tmp_path / "reports"
    done = refresh(kb((FULL, RECORD)), reports_dir, github, progress=False, today="2026-12-02")
    assert done.candidates == 1 and done.searched + done.skipped == 2
    assert waits and waits[0] == pytest.approx(6)  # waited for the rate limit to reset, then searched again
    assert all(auth == "Bearer t0ken" for _, _, auth in server.seen)
    (found,) = load_reports(reports_dir / "candidates")[RECORD.id]
    assert found.url == ISSUE.format(1) and found.state == "closed" and found.opened == "2026-09-30"
    assert "read the thread" in found.checked
    assert load_reports(reports_dir) == {}  # a candidate is no report until someone confirms it
    assert json.loads((reports_dir / "refreshed.json").read_text())["errors"] == sorted([FULL.id, RECORD.id])

    again = refresh(kb((FULL, RECORD)), reports_dir, github, progress=False)  # nothing new or changed: no search
    assert again.searched == again.skipped == again.candidates == 0


def test_a_thread_confirmed_already_is_not_offered_again(fake, tmp_path):
    paste = "ValueError: The batch of 3 sequences does not fit in the scheduler's token budget"
    server = fake({"token budget": [item(7, "seen before", paste)]})
    reports_dir = tmp_path / "reports"
    reports_dir.mkdir()
    (reports_dir / f"{RECORD.id}.yaml").write_text(
        f"error: x\nreports:\n- url: {ISSUE.format(7)}\n  title: seen before\n  checked: read it\n")
    done = refresh(kb((RECORD,)), reports_dir, client(server.url)[0], progress=False)
    assert done.searched == 1 and done.candidates == 0 and not (reports_dir / "candidates").exists()


def test_without_a_token_or_a_network_the_refresh_says_so_in_one_line(tmp_path, capsys):
    with pytest.raises(UserError, match="GITHUB_TOKEN is not set"):
        token_from({"GITHUB_TOKEN": " "})
    assert token_from({"GH_TOKEN": "abc"}) == "abc"
    github, _ = client("http://127.0.0.1:9")  # nothing listens there
    with pytest.raises(UserError, match=r"cannot reach http://127.0.0.1:9 .*needs network access"):
        github.search('"x" is:issue')


def test_the_command_refreshes_a_release_and_fails_cleanly_without_a_token(fake, tmp_path, monkeypatch, capsys):
    repo = make_repo(tmp_path, {"v1.0.0": {"vllm/core.py": (
        "def fit(size):\n"
        "    if size > 8:\n"
        "        raise ValueError(f'The batch of {size} sequences does not fit in the scheduler token budget')\n")}})
    paste = "ValueError: The batch of 12 sequences does not fit in the scheduler token budget"
    server = fake({"token budget": [item(5, "crash", paste)]})
    args = ["refresh-reports", "--repo", str(repo), "--ref", "v1.0.0", "--annotations", str(tmp_path / "ann"),
            "--cache-dir", str(tmp_path / "cache"), "--api-url", server.url, "--no-progress", "--jobs", "1"]
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    assert cli.main(args) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "GITHUB_TOKEN is not set" in err and "Traceback" not in err
    monkeypatch.setenv("GITHUB_TOKEN", "t0ken")
    monkeypatch.setattr("vllm_errors.refresh.MIN_INTERVAL", 0)
    assert cli.main(args) == 0
    assert "1 new candidate reports" in capsys.readouterr().out
    (found,) = next(iter(load_reports(tmp_path / "ann" / "reports" / "candidates").values()))
    assert found.url == ISSUE.format(5)
