"""The scan cache: one module's scan stored under its blob id, path and scanner version; below that, the scans
of its top-level definitions (`scanner.units`), so a file changed in one function is rescanned in that function only."""

from __future__ import annotations

import hashlib
import sqlite3
import zlib
from pathlib import Path
from typing import Iterable

from .scanner import SCANNER_VERSION


FILE_NAME = "scans.sqlite3"


def scan_key(path: str, blob: str) -> str:
    # The path is part of the key: a module's qualified names depend on where it lives.
    return hashlib.sha256(f"{SCANNER_VERSION}\x1f{path}\x1f{blob}".encode()).hexdigest()


class ScanCache:
    """A SQLite file of compressed JSON scans; sqlite makes an interrupted write harmless."""

    def __init__(self, directory: Path, readonly: bool = False) -> None:
        """Scanning processes open it read-only while the main process writes: WAL lets them. A relative
        directory is taken from the working directory, as the user meant it."""
        directory = Path(directory).absolute()
        self.directory = directory
        if readonly:
            self._db = sqlite3.connect(f"{(directory / FILE_NAME).as_uri()}?mode=ro", uri=True)
            return
        directory.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(directory / FILE_NAME)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS scans (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
        self._db.commit()

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

    def put_many(self, entries: dict[str, bytes]) -> None:
        self._db.executemany("INSERT OR REPLACE INTO scans VALUES (?, ?)", [(k, zlib.compress(v, 6)) for k, v in entries.items()])

    def commit(self) -> None:
        self._db.commit()

    def close(self) -> None:
        self._db.commit()
        self._db.close()

    def __enter__(self) -> "ScanCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
