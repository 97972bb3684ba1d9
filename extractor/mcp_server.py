"""`vllm-errors mcp`: the knowledge base as an MCP server on stdio, for an AI assistant helping a vLLM user.

Four tools, each answering in plain text short enough for a context window (at most MAX_RESULTS results, each
at most MAX_CHARS characters, under 500 tokens): explain_error(paste), get_error(id), search_errors(query) and
release_notes(tag). Answers come from the same place as `explain`'s (bundle.open_site): a built site, the
bundle this install carries, or the published site."""

from __future__ import annotations

from .bundle import Site
from .model import UserError

MAX_RESULTS = 10
MAX_CHARS = 1200  # at most about 450 tokens even counting a token per 4 letters: under the 500 a result may take


def _cut(text: str, limit: int = MAX_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def error_text(site: Site, error_id: str, values: dict[str, str] | None = None) -> str:
    """One error as an assistant reads it: title, status, meaning, when, solutions, the page; within MAX_CHARS."""
    r = site.record(error_id)
    a = r["annotation"]
    head = [f"{r['title']}", f"id {error_id}; raised at " + "; ".join(f"{s['path']}:{s['line']} in {s['function']}" for s in r["sites"])
            + f" ({r['ref']})"]
    history = r.get("history")
    if history and history["status"] == "removed":
        head.append(f"vLLM raised it up to {history['last']}; " + (f"reworded in {history['removed_in']} as {history['superseded_by']}"
                                                                     if history["superseded_by"] else f"removed in {history['removed_in']}"))
    if values:
        head.append("values: " + ", ".join(f"{k} = {v}" for k, v in values.items()))
    tail = [f"page: {site.page(error_id)}"]
    body = []
    if a.get("meaning"):
        body.append(f"meaning: {a['meaning']}")
    if a.get("solutions"):
        body.append("solutions:\n" + "\n".join(f"- {s}" for s in a["solutions"]))
    elif a.get("kind") == "internal":
        body.append("solutions: this looks like a bug in vLLM; report it with the full traceback.")
    if a.get("triggers"):
        body.append("when: " + " ".join(a["triggers"]))
    room = MAX_CHARS - sum(len(x) + 1 for x in head + tail)
    text = "\n".join(body)
    return "\n".join(head + [_cut(text, max(room, 200))] + tail)[:MAX_CHARS]


def explain_text(site: Site, paste: str) -> str:
    from . import lookup

    if not paste.strip():
        return "Nothing to look up: give the error line or the whole traceback."
    answer = lookup.answer(site.index, lookup.read_paste(paste), top=3)
    found = answer.finding
    if found is None or found.kind == "none" or not found.matches and found.kind not in ("outside", "assert"):
        return "No vLLM error matches this paste." + (" Closest: " + "; ".join(f"{m.title} ({m.id})" for m in found.matches[:3]) if found and found.matches else "")
    if found.kind == "assert":
        return _cut(f"An internal check of vLLM failed: {found.raised.source} in {found.assertion.function}, "
                    f"{found.assertion.path}:{found.assertion.line}. An assert without a message has no page; read its "
                    "condition against the model and flags used, else report it to vLLM with the whole traceback.")
    if found.kind == "outside":
        see = "; ".join(site.page(i) for i in found.outside.see[:3])
        return _cut(found.outside.says + (f" Pages on the usual cause: {see}" if see else ""))
    best = found.matches[0]
    text = f"[{best.confidence} confidence]\n" + error_text(site, best.id, best.values)
    if found.kind == "wrapper":
        causes = next((e.get("c", []) for e in site.index["errors"] if e["i"] == best.id), [])
        more = "\nThis error points at another one printed earlier in the log, often by another process; paste the whole log."
        if causes:
            more += " Reported most often behind it: " + "; ".join(causes[:5])
        text = _cut(text, MAX_CHARS - len(more)) + more
    return text[:MAX_CHARS]


def search_text(site: Site, query: str, limit: int = MAX_RESULTS) -> str:
    from . import lookup

    if not query.strip():
        return "Give words of the error to search for."
    answer = lookup.answer(site.index, lookup.read_paste(query), top=max(1, min(limit, MAX_RESULTS)))
    matches = answer.finding.matches if answer.finding else ()
    if not matches:
        return "No vLLM error matches these words."
    return "\n".join(_cut(f"{m.id}: {m.title} ({site.page(m.id)})", 400) for m in matches[:MAX_RESULTS])


def release_text(site: Site, tag: str) -> str:
    releases = site.releases()
    wanted = tag if tag.startswith("v") else f"v{tag}"
    notes = next((n for n in releases if n["ref"] == wanted), None)
    if notes is None:
        known = [n["ref"] for n in releases]
        return f"No release {tag} here; known: {known[0]} to {known[-1]}." if known else "No release notes here."
    titles = {e["i"]: e["n"] for e in site.index["errors"]}
    lines = [f"vLLM {wanted}: {notes['errors']} errors; since {notes.get('previous') or 'the first release covered'}: "
             f"{len(notes['added'])} added, {len(notes['removed'])} removed, {len(notes['reworded'])} reworded. "
             f"Page: {site.link(f'releases/{wanted}.html')}"]
    for label, ids in (("added", notes["added"]), ("removed", notes["removed"]), ("reworded", [new for _, new in notes["reworded"]])):
        shown = ids[:3]
        if shown:
            lines.append(f"{label} (first {len(shown)} of {len(ids)}): " + "; ".join(_cut(f"{titles.get(i, i)} ({i})", 160) for i in shown))
    return _cut("\n".join(lines))


def make_server(site: Site):
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        raise UserError("the MCP server needs the mcp package: pip install 'vllm-errors[mcp]'") from None
    server = MCPServer("vllm-errors", instructions=(
        "Explains errors raised by vLLM (the LLM inference server): paste an error line or a traceback into "
        "explain_error; look an error up by id with get_error, by words with search_errors; release_notes(tag) says "
        "which errors a vLLM release added or removed. Every answer links the error's page."))

    @server.tool()
    def explain_error(paste: str) -> str:
        """Explain a pasted vLLM error message, traceback or log: what it means, what to change, the page."""
        return explain_text(site, paste)

    @server.tool()
    def get_error(id: str) -> str:  # noqa: A002 (the tool's argument name, as the issue names it)
        """One vLLM error by its 16-hex id: meaning, when it happens, solutions, the page."""
        if not any(e["i"] == id for e in site.index["errors"]):
            return f"No error with id {id!r}: ids are 16 hex digits, as explain_error and search_errors give them."
        return error_text(site, id)

    @server.tool()
    def search_errors(query: str) -> str:
        """vLLM errors whose message matches these words, best first (at most 10): id, message, page."""
        return search_text(site, query)

    @server.tool()
    def release_notes(tag: str) -> str:
        """What a vLLM release (e.g. v0.34.0) changed in its errors: counts and the first added, removed and reworded."""
        return release_text(site, tag)

    return server
