"""An error's wordings across releases, as the history links them: the ones it was reworded from, the ones it became.

Curated notes, public reports and wrapper root causes all follow an error through its rewordings by these walks.
"""

from __future__ import annotations

from .model import ErrorHistory

MAX_REWORDINGS = 8  # wordings followed from one error


def earlier_wordings(error_id: str, history: dict[str, ErrorHistory] | None) -> list[str]:
    """The errors reworded into this one, and those reworded into them, nearest first. A wording the newest release
    still raises is an error of its own (its note and its reports stay its own) and is not followed."""
    found: list[str] = []
    todo = list(history[error_id].supersedes) if history and error_id in history else []
    while todo and len(found) < MAX_REWORDINGS:
        old = todo.pop(0)
        if old in found or old == error_id or old in history and history[old].status == "current":
            continue
        found.append(old)
        todo += history[old].supersedes if old in history else ()
    return found


def later_wordings(error_id: str, history: dict[str, ErrorHistory] | None) -> list[str]:
    """The error itself and the wordings it was reworded into, in order."""
    chain = [error_id]
    while len(chain) <= MAX_REWORDINGS and history and chain[-1] in history and history[chain[-1]].superseded_by:
        chain.append(history[chain[-1]].superseded_by)
    return chain


def counted_later(error_id: str, history: dict[str, ErrorHistory] | None, present) -> bool:
    """Whether the wording that replaced this error is among `present`, whose page then counts this one's reports."""
    seen = history.get(error_id) if history else None
    return bool(seen and seen.superseded_by in present)
