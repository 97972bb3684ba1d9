"""The local preview server (`vllm-errors serve`) against hostile clients: odd paths, stalled and idle connections."""

from __future__ import annotations

import json
import select
import socket
import threading
import time

import pytest

from vllm_errors import serve
from vllm_errors.cli import main

TIMEOUT = 0.5  # the server's request timeout in these tests, so a stalled client is dropped quickly


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    (root / "sub").mkdir(parents=True)
    (root / "docs").mkdir()
    (root / "api" / "errors").mkdir(parents=True)
    (root / "index.html").write_text("<h1>home</h1>")
    (root / "sub" / "secret-listing-entry.txt").write_text("a file in a directory without index.html")
    (root / "docs" / "index.html").write_text("<h1>docs</h1>")
    (root / "api" / "errors" / "abc").write_text(json.dumps({"id": "abc"}))
    (root / "api" / "errors" / "abc.json").write_text(json.dumps({"id": "abc"}))
    (tmp_path / "outside.txt").write_text("not part of the site")
    (root / "escape").symlink_to(tmp_path / "outside.txt")
    return root


@pytest.fixture
def start(site):
    """Start a preview of `site` on a free loopback port in a thread; stopped, with its handler threads, afterwards."""
    servers = []

    def start(**options) -> serve.PreviewServer:
        options.setdefault("request_timeout", TIMEOUT)
        server = serve.make_server(site, "127.0.0.1", 0, **options)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        servers.append((server, thread))
        return server

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(5)
    for thread in threading.enumerate():
        if "process_request_thread" in thread.name:
            thread.join(5)


def _exchange(server: serve.PreviewServer, data: bytes, timeout: float = 5.0) -> bytes:
    """Send raw bytes, then read the answer until the server closes the connection."""
    with socket.create_connection(server.server_address[:2], timeout=timeout) as client:
        client.sendall(data)
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    return answer


def _get(server: serve.PreviewServer, target: bytes | str) -> tuple[int, dict[str, str], bytes]:
    if isinstance(target, str):
        target = target.encode("latin-1")
    answer = _exchange(server, b"GET " + target + b" HTTP/1.1\r\nHost: preview\r\n\r\n")
    assert answer, "the server dropped the connection without an answer"
    head, _, body = answer.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines)}
    return int(status_line.split()[1]), headers, body


def _handler_threads() -> int:
    return sum("process_request_thread" in t.name for t in threading.enumerate())


# --- what a preview serves ----------------------------------------------------------------------------


def test_the_site_and_its_api_are_served(start):
    server = start()
    status, _, body = _get(server, "/")
    assert (status, body) == (200, b"<h1>home</h1>")
    assert _get(server, "/docs/")[:3:2] == (200, b"<h1>docs</h1>")
    assert _get(server, "/docs")[0] == 301  # a directory with an index is still reached without its slash
    for target in ("/api/errors/abc", "/api/errors/abc.json"):
        status, headers, body = _get(server, target)
        assert status == 200 and headers["content-type"] == "application/json"
        assert json.loads(body) == {"id": "abc"}
    assert _get(server, "/missing.html")[0] == 404


@pytest.mark.parametrize("target", ["/sub/", "/sub", "/sub/?C=N;O=D"])
def test_a_directory_without_index_is_not_found_and_never_listed(start, target):
    status, _, body = _get(start(), target)
    assert status == 404
    assert b"secret-listing-entry" not in body and b"Directory listing" not in body


def test_a_symlink_out_of_the_site_is_not_followed(start):
    status, _, body = _get(start(), "/escape")
    assert status == 404 and b"not part of the site" not in body


# --- odd paths: a clean 4xx, never a traceback or a dropped connection ----------------------------------

ODD_TARGETS = [
    pytest.param("/index.html%00.json", id="percent-nul-before-extension"),
    pytest.param("/%00", id="percent-nul"),
    pytest.param("/index.html\x00", id="raw-nul"),
    pytest.param("/../../etc/passwd", id="dot-dot"),
    pytest.param("/%2e%2e/%2e%2e/etc/passwd", id="encoded-dot-dot"),
    pytest.param("/sub/..%2f..%2fetc%2fpasswd", id="encoded-slash-dot-dot"),
    pytest.param("/a%5c..%5c..%5cetc", id="encoded-backslash"),
    pytest.param("/%zz", id="invalid-percent"),
    pytest.param("/index.html%4", id="truncated-percent"),
    pytest.param("/%ff%fe", id="non-utf8-percent"),
    pytest.param("/%c3%28", id="invalid-utf8-sequence"),
    pytest.param("/\xff\xfe.html", id="raw-non-utf8-bytes"),
    pytest.param("/%0d%0aSet-Cookie:x", id="encoded-crlf"),
    pytest.param("/" + "a" * 300, id="overlong-name"),
    pytest.param("/" + "a/" * 3000, id="overlong-address"),
    pytest.param("/" + "a" * 70000, id="longer-than-a-request-line"),
    pytest.param("*", id="asterisk"),
    pytest.param("http://elsewhere/index.html", id="absolute-form"),
]


@pytest.mark.parametrize("target", ODD_TARGETS)
def test_an_odd_path_gets_a_clean_4xx_and_nothing_on_stderr(start, capfd, target):
    status, _, _ = _get(start(), target)
    assert 400 <= status < 500
    out, err = capfd.readouterr()
    assert "Traceback" not in err and err == ""
    assert out == ""


def test_a_bug_in_a_handler_is_one_line_on_stderr_not_a_traceback(start, capfd, monkeypatch):
    def broken(self):
        raise RuntimeError("a bug")

    monkeypatch.setattr(serve._Handler, "send_head", broken)
    _exchange(start(), b"GET / HTTP/1.0\r\n\r\n")
    _, err = capfd.readouterr()
    assert "Traceback" not in err
    assert err.count("\n") == 1 and "RuntimeError: a bug" in err


# --- resources: stalled clients are dropped, threads are bounded ----------------------------------------


def _seconds_until_closed(client: socket.socket, limit: float, trickle: bool) -> float:
    """How long the server takes to close a client's connection, sending a byte every 0.1 s if `trickle`."""
    began = time.monotonic()
    while time.monotonic() - began < limit:
        if trickle:
            try:
                client.send(b"X")
            except OSError:
                return time.monotonic() - began
        readable, _, _ = select.select([client], [], [], 0.1)
        if readable:
            try:
                data = client.recv(1024)
            except OSError:
                return time.monotonic() - began
            assert data == b"", f"the server answered a half-sent request: {data!r}"
            return time.monotonic() - began
    pytest.fail(f"the server kept a stalled connection open for over {limit} s")


@pytest.mark.parametrize("trickle", [False, True], ids=["stalled", "trickling"])
def test_a_half_sent_request_is_dropped_within_the_timeout(start, trickle):
    server = start()
    with socket.create_connection(server.server_address[:2]) as client:
        client.sendall(b"GET / HTTP/1.1\r\nHost: preview\r\n")
        assert _seconds_until_closed(client, limit=4 * TIMEOUT + 1, trickle=trickle) < 2 * TIMEOUT + 0.5


def test_idle_connections_never_take_more_threads_than_the_bound(start):
    bound = 3
    server = start(max_connections=bound, request_timeout=3.0)
    before = threading.active_count()
    clients = [socket.create_connection(server.server_address[:2]) for _ in range(8)]
    try:
        deadline = time.monotonic() + 2
        while _handler_threads() < bound and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _handler_threads() == bound  # the connections did reach the server
        time.sleep(0.3)
        assert threading.active_count() - before <= bound
        assert _handler_threads() == bound
    finally:
        for client in clients:
            client.close()
    # Once the idle clients leave, the connections that waited are handled and the preview answers again.
    assert _get(server, "/")[0] == 200


def test_a_connection_beyond_the_bound_waits_for_a_free_one(start):
    server = start(max_connections=1, request_timeout=3.0)
    with socket.create_connection(server.server_address[:2]) as idle:
        threading.Timer(0.3, idle.close).start()
        began = time.monotonic()
        status, _, _ = _get(server, "/")
    assert status == 200 and 0.2 < time.monotonic() - began < 2


def test_a_connection_that_waited_the_whole_timeout_is_refused_with_503(start):
    server = start(max_connections=1)
    server._slots.acquire()  # every connection taken, for longer than any request may wait
    try:
        status, headers, _ = _get(server, "/")
    finally:
        server._slots.release()
    assert status == 503 and headers["retry-after"] == "1"


# --- where it listens, and what it says about it ------------------------------------------------------


def test_it_listens_on_loopback_unless_told_otherwise(site):
    with serve.make_server(site, port=0) as server:
        assert server.server_address[0] == "127.0.0.1"
        assert serve.exposure_warning(server.server_address) is None


@pytest.mark.parametrize("address", ["127.0.0.1", "127.0.0.53", "::1", "::ffff:127.0.0.1"])
def test_loopback_addresses_get_no_warning(address):
    assert serve.is_loopback(address)
    assert serve.exposure_warning((address, 8000)) is None


@pytest.mark.parametrize("address", ["0.0.0.0", "::", "192.168.1.20", "10.0.0.5", "fe80::1%eth0"])
def test_other_addresses_get_a_one_line_warning(address):
    warning = serve.exposure_warning((address, 8000))
    assert warning is not None and warning.startswith("warning:") and "\n" not in warning
    assert "127.0.0.1" in warning


@pytest.fixture
def no_serving(monkeypatch):
    """`vllm-errors serve` up to the point of serving: it binds, says what it says, and returns."""
    monkeypatch.setattr(serve.PreviewServer, "serve_forever", lambda self, poll_interval=0.5: None)


def test_the_startup_line_says_it_is_a_local_preview_on_loopback(site, capsys, no_serving):
    assert main(["serve", "--site-dir", str(site), "--port", "0"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"serving {site} at http://127.0.0.1:")
    assert "local preview, not for production" in out
    assert err == ""


def test_listening_on_every_interface_is_warned_about_in_one_line(site, capsys, no_serving):
    assert main(["serve", "--site-dir", str(site), "--host", "0.0.0.0", "--port", "0"]) == 0
    out, err = capsys.readouterr()
    assert "http://0.0.0.0:" in out
    assert err.count("\n") == 1 and err.startswith("warning: listening on every network interface")


@pytest.mark.parametrize("port", ["70000", "-1", "eighty"])
def test_a_port_out_of_range_is_a_usage_error(site, capsys, port):
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--site-dir", str(site), "--port", port])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "0 to 65535" in err and "Traceback" not in err
