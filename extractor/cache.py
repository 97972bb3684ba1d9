"""The scan cache: one module's scan stored under its blob id, path and scanner version."""

from __future__ import annotations

import hashlib
import sqlite3
import zlib
from pathlib import Path
from typing import Iterable

from .scanner import SCANNER_VERSION


def scan_key(path: str, blob: str) -> str:
    # The path is part of the key: a module's qualified names depend on where it lives.
    return hashlib.sha256(f"{SCANNER_VERSION}\x1f{path}\x1f{blob}".encode()).hexdigest()


class ScanCache:
    """A SQLite file of compressed JSON scans; sqlite makes an interrupted write harmless."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(directory / "scans.sqlite3")
        self._db.execute("CREATE TABLE IF NOT EXISTS scans (key TEXT PRIMARY KEY, value BLOB NOT NULL)")

    def get_many(self, keys: Iterable[str]) -> dict[str, bytes]:
        keys = list(keys)
        found: dict[str, bytes] = {}
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for key, value in self._db.execute(f"SELECT key, value FROM scans WHERE key IN ({marks})", chunk):
                found[key] = zlib.decompress(value)
        return found

    def put(self, key: str, value: bytes) -> None:
        self._db.execute("INSERT OR REPLACE INTO scans VALUES (?, ?)", (key, zlib.compress(value, 6)))

    def commit(self) -> None:
        self._db.commit()

    def close(self) -> None:
        self._db.commit()
        self._db.close()

    def __enter__(self) -> "ScanCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
