"""The static JSON API: one record per error, an index of all errors, the records' JSON Schema, and release notes."""

from __future__ import annotations

import json
from dataclasses import asdict

from .lookup import build_index
from .model import KnowledgeBase, record_schema, record_to_data

SCHEMA_ID = "api/schema.json"
LOOKUP_ID = "api/lookup.json"  # the compact index that the site's box and `vllm-errors explain` read


def _dumps(data: object) -> str:
    return json.dumps(data, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"


def strict_schema() -> dict:
    """The record schema, closed: a record with a field the model does not know is invalid."""

    def close(node: object) -> None:
        if isinstance(node, dict):
            if node.get("type") == "object" and "properties" in node:
                node.setdefault("additionalProperties", False)
            for value in node.values():
                close(value)
        elif isinstance(node, list):
            for value in node:
                close(value)

    schema = record_schema()
    close(schema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "vLLM error record"
    return schema


def index_entry(record) -> dict:
    first = record.sites[0]
    return {
        "id": record.id,
        "exception": record.exception,
        "title": record.title,
        "template": record.template,
        "kind": record.kind,
        "subsystem": record.subsystem,
        "path": first.path,
        "line": first.line,
        "sites": len(record.sites),
        "url": record.url,
        "reports": len(record.reports),
    }


def render_api(kb: KnowledgeBase) -> dict[str, str]:
    """Every API file, keyed by its path under the docs directory.

    `api/errors/<id>` has the same bytes as `api/errors/<id>.json`, for clients that ask
    for the address without an extension; `vllm-errors serve` gives both as JSON.
    """
    files: dict[str, str] = {}
    for record in kb.records:
        text = _dumps(record_to_data(record))
        files[f"api/errors/{record.id}.json"] = text
        files[f"api/errors/{record.id}"] = text
    files["api/errors.json"] = _dumps(
        {
            "snapshot": asdict(kb.snapshot),
            "count": len(kb.records),
            "errors": [index_entry(r) for r in kb.records],
        }
    )
    if kb.history:
        # What changed release by release: the release notes pages as data.
        files["api/releases.json"] = _dumps({"releases": list(kb.history.refs), "notes": [asdict(n) for n in kb.history.notes]})
    files[SCHEMA_ID] = json.dumps(strict_schema(), sort_keys=True, indent=1) + "\n"
    files[LOOKUP_ID] = _dumps(build_index(kb))
    return files
