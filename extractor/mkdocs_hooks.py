"""The mkdocs hook that appends the generated index pages (generated/nav.json under docs_dir) to the nav."""

from __future__ import annotations

import json
from pathlib import Path

NAV_JSON = "generated/nav.json"  # written by vllm_errors.render.render_pages


def on_config(config):
    path = Path(config.docs_dir) / NAV_JSON
    if path.is_file():  # before the first render there is only the hand-written Home
        config.nav = list(config.nav or []) + json.loads(path.read_text(encoding="utf-8"))["nav"]
    return config
