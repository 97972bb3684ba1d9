"""Serving a built site locally, with the API's extensionless addresses given as JSON."""

from __future__ import annotations

import functools
import http.server
from pathlib import Path


class _Handler(http.server.SimpleHTTPRequestHandler):
    def guess_type(self, path: str | Path) -> str:
        path = str(path)
        if "/api/" in path.replace("\\", "/") and (path.endswith(".json") or "." not in Path(path).name):
            return "application/json"
        return super().guess_type(path)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class names it so
        pass


def make_server(site_dir: Path, host: str = "127.0.0.1", port: int = 8000) -> http.server.ThreadingHTTPServer:
    handler = functools.partial(_Handler, directory=str(site_dir))
    return http.server.ThreadingHTTPServer((host, port), handler)
