"""Serving a built site locally as a preview, with the API's extensionless addresses given as JSON."""

from __future__ import annotations

import functools
import http.server
import io
import ipaddress
import os
import re
import socket
import sys
import threading
import time
import urllib.parse
from http import HTTPStatus
from pathlib import Path

MAX_CONNECTIONS = 16  # connections handled at once, one thread each; more wait in the listen queue
REQUEST_TIMEOUT = 5.0  # seconds a client has to send its whole request, and for each write of the answer
MAX_TARGET = 2048  # characters in a request's target: no page of the site has an address near this long

_BAD_PERCENT = re.compile(r"%(?![0-9A-Fa-f]{2})")
_RAW_FORBIDDEN = re.compile(r"[\x00-\x20\x7f]")
_DECODED_FORBIDDEN = re.compile(r"[\x00-\x1f\x7f\\]")


def target_problem(target: str) -> tuple[HTTPStatus, str] | None:
    """Why a request's target is refused before it comes near the file system, or None if it is fine."""
    if len(target) > MAX_TARGET:
        return HTTPStatus.REQUEST_URI_TOO_LONG, f"the address is longer than {MAX_TARGET} characters"
    if not target.startswith("/"):
        return HTTPStatus.BAD_REQUEST, "the address does not start with /"
    # The request line is read as Latin-1, so raw bytes past ASCII show up here as characters.
    if not target.isascii() or _RAW_FORBIDDEN.search(target):
        return HTTPStatus.BAD_REQUEST, "the address holds a raw control, space or non-ASCII character"
    if _BAD_PERCENT.search(target):
        return HTTPStatus.BAD_REQUEST, "the address holds a % not followed by two hex digits"
    path = target.split("?", 1)[0].split("#", 1)[0]
    try:
        decoded = urllib.parse.unquote_to_bytes(path).decode("utf-8")
    except UnicodeDecodeError:
        return HTTPStatus.BAD_REQUEST, "the address does not decode as UTF-8"
    if _DECODED_FORBIDDEN.search(decoded):
        return HTTPStatus.BAD_REQUEST, "the address decodes to a control character or a backslash"
    if ".." in decoded.split("/"):
        return HTTPStatus.BAD_REQUEST, "the address climbs out with .."
    return None


def is_loopback(address: str) -> bool:
    """Whether a bound address is reachable from this machine only."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def preview_url(server_address: tuple) -> str:
    host, port = server_address[:2]
    return f"http://[{host}]:{port}/" if ":" in host else f"http://{host}:{port}/"


def exposure_warning(server_address: tuple) -> str | None:
    """The one-line warning for a preview that other machines can reach, or None when it is loopback only."""
    host = server_address[0]
    if is_loopback(host):
        return None
    where = "every network interface" if host in ("0.0.0.0", "::") else f"{host}, not a loopback address"
    return (
        f"warning: listening on {where}: other machines that can reach this one can read the preview; "
        "--host 127.0.0.1 keeps it to this machine"
    )


class _DeadlineReader(socket.SocketIO):
    """A socket read against one deadline, so a client trickling its request a byte at a time is dropped too."""

    def __init__(self, sock: socket.socket, seconds: float) -> None:
        super().__init__(sock, "rb")
        self._deadline = time.monotonic() + seconds

    def readinto(self, b: bytearray | memoryview) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request took too long to arrive")
        self._sock.settimeout(left)
        return super().readinto(b)


class _Handler(http.server.SimpleHTTPRequestHandler):
    server: PreviewServer
    server_version = "vllm-errors-preview"
    sys_version = ""

    def setup(self) -> None:
        self.timeout = self.server.request_timeout
        super().setup()
        self.rfile.close()
        self.rfile = io.BufferedReader(_DeadlineReader(self.connection, self.timeout))

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        # The request is in: from here on the timeout bounds each write of the answer, not the whole of it.
        self.connection.settimeout(self.timeout)
        problem = target_problem(self.path)
        if problem:
            self.send_error(*problem)
            return False
        return True

    def send_head(self) -> io.BufferedIOBase | None:
        path = self.translate_path(self.path)
        if not _inside(path, self.directory):
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None
        if os.path.isdir(path) and not os.path.isfile(os.path.join(path, "index.html")):
            self.send_error(HTTPStatus.NOT_FOUND, "File not found")
            return None
        try:
            return super().send_head()
        except ValueError:
            # What target_problem lets through and open() still refuses: nothing is sent yet, so answer it.
            self.send_error(HTTPStatus.BAD_REQUEST, "the address names no possible file")
            return None

    def list_directory(self, path: str | os.PathLike[str]) -> None:
        self.send_error(HTTPStatus.NOT_FOUND, "File not found")
        return None

    def guess_type(self, path: str | os.PathLike[str]) -> str:
        path = str(path)
        in_api = os.path.relpath(path, self.directory).split(os.sep)[0] == "api"
        if in_api and (path.endswith(".json") or "." not in os.path.basename(path)):
            return "application/json"
        return super().guess_type(path)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class names it so
        pass


def _inside(path: str, directory: str) -> bool:
    real, root = os.path.realpath(path), os.path.realpath(directory)
    return os.path.commonpath([real, root]) == root


class PreviewServer(http.server.ThreadingHTTPServer):
    """A threaded HTTP server with at most max_connections handler threads and a timeout on every client."""

    def __init__(self, site_dir: Path, host: str, port: int, *, max_connections: int, request_timeout: float) -> None:
        family, _, _, _, address = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
        self.address_family = family
        self.max_connections = max_connections
        self.request_timeout = request_timeout
        self._slots = threading.Semaphore(max_connections)
        super().__init__(address[:2], functools.partial(_Handler, directory=str(site_dir)))

    def process_request(self, request: socket.socket, client_address: tuple) -> None:
        # Waiting here, in the accepting thread, leaves further connections in the kernel's listen queue
        # rather than each in a thread of its own.
        if not self._slots.acquire(timeout=self.request_timeout):
            self._refuse(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            self.shutdown_request(request)
            raise

    def process_request_thread(self, request: socket.socket, client_address: tuple) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()

    def _refuse(self, request: socket.socket) -> None:
        body = b"busy: every connection of this preview is taken, try again\n"
        head = f"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\nRetry-After: 1\r\n\r\n"
        try:
            request.settimeout(1.0)
            request.sendall(head.encode() + body)
        except OSError:
            pass
        self.shutdown_request(request)

    def handle_error(self, request: socket.socket, client_address: tuple) -> None:
        error = sys.exc_info()[1]
        if isinstance(error, (ConnectionError, TimeoutError)):
            return  # the client went away or stalled: nothing to say about it
        print(f"vllm-errors serve: {client_address[0]}: {type(error).__name__}: {error}", file=sys.stderr)


def make_server(
    site_dir: Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    max_connections: int = MAX_CONNECTIONS,
    request_timeout: float = REQUEST_TIMEOUT,
) -> PreviewServer:
    return PreviewServer(site_dir, host, port, max_connections=max_connections, request_timeout=request_timeout)
