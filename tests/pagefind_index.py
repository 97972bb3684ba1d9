"""What the built site's Pagefind index holds: each indexed page's URL and text, read from its fragments."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

SIGNATURE = b"pagefind_dcd"  # what Pagefind puts before each decompressed file


def indexed_pages(site: Path) -> dict[str, str]:
    """URL (from the site's root, "errors/<id>.html") -> the text Pagefind indexed for it."""
    pages = {}
    for path in (site / "pagefind" / "fragment").glob("*.pf_fragment"):
        data = gzip.decompress(path.read_bytes())
        assert data.startswith(SIGNATURE), path
        fragment = json.loads(data[len(SIGNATURE):])
        pages[fragment["url"].lstrip("/")] = fragment["content"]
    return pages
