"""How a user selects what vLLM's registries hold, and the sentences that say so.

The program model (extractor/program.py) tells which registered names a file's code runs under: every import
chain that reaches it starts at a module vLLM imports only for them. What it cannot tell is how a user picks
a name; this table says it per registry. Each lever is checked against the release (a flag that is not there,
or a JSON key its config class does not have, and the registry says nothing), so a page never names one that
the release lacks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from .facts import Registration
from .markup import code

MAX_NAMES = 5  # names said in one sentence: more are counted


@dataclass(frozen=True)
class Selector:
    registry: re.Pattern[str]  # the registry's name as the code spells it
    what: str  # what its entries are, in the singular: "KV connector"
    flag: str = ""  # the flag that picks one; "" for a model's architecture, which the checkpoint picks
    key: str = ""  # the key of the flag's JSON that names it; "" when the flag takes the name itself
    automatic: bool = False  # vLLM picks one itself when no flag says
    draft: bool = False  # a draft model's architecture (`--speculative-config`), not the served model's


_MODEL_TABLES = r"_(?:TEXT_GENERATION|MULTIMODAL|EMBEDDING|LATE_INTERACTION|REWARD|TOKEN_CLASSIFICATION|SEQUENCE_CLASSIFICATION|TRANSFORMERS_SUPPORTED)_MODELS"
SELECTORS = (
    Selector(re.compile(r"^KVConnectorFactory\.register_connector$"), "KV connector", "--kv-transfer-config", "kv_connector"),
    Selector(re.compile(r"^ECConnectorFactory\.register_connector$"), "encoder-cache connector", "--ec-transfer-config", "ec_connector"),
    Selector(re.compile(r"^WeightTransferEngineFactory\.register_engine$"), "weight-transfer backend", "--weight-transfer-config", "backend"),
    Selector(re.compile(r"^_TOOL_PARSERS_TO_REGISTER$"), "tool-call parser", "--tool-call-parser"),
    Selector(re.compile(r"^_REASONING_PARSERS_TO_REGISTER$"), "reasoning parser", "--reasoning-parser"),
    Selector(re.compile(r"^AttentionBackendEnum$"), "attention backend", "--attention-backend", automatic=True),
    Selector(re.compile(f"^{_MODEL_TABLES}$"), "architecture"),
    Selector(re.compile(r"^_SPECULATIVE_DECODING_MODELS$"), "architecture", draft=True),
)


@dataclass(frozen=True)
class Selection:
    """The registered names a file's code runs under, grouped by how a user picks them."""

    selector: Selector
    names: tuple[str, ...]


def selections(registered: Sequence[Registration], lever_exists) -> list[Selection] | None:
    """The names grouped by selector, in the table's order; None when one registry is not in the table, or its lever
    is not in the release (`lever_exists(flag, key)`): then which selection runs the code cannot be said whole."""
    grouped: dict[Selector, list[str]] = {}
    for r in registered:
        selector = next((s for s in SELECTORS if s.registry.match(r.registry)), None)
        if selector is None or selector.flag and not lever_exists(selector.flag, selector.key):
            return None
        grouped.setdefault(selector, [])
        if r.name not in grouped[selector]:
            grouped[selector].append(r.name)
    return [Selection(s, tuple(grouped[s])) for s in SELECTORS if s in grouped] or None


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(code(n) for n in names[:MAX_NAMES])
    return shown + (f" and {len(names) - MAX_NAMES} more" if len(names) > MAX_NAMES else "")


def _clause(s: Selection) -> str:
    sel, one = s.selector, len(s.names) == 1
    named = code(s.names[0]) if one else f"one of {_names(s.names)}"
    among = code(s.names[0]) if one else f"one of the {sel.what}s {_names(s.names)}"  # "is `X`", "is one of the KV connectors X, Y"
    if not sel.flag:
        whose = "the draft model's (`--speculative-config`)" if sel.draft else "the model's"
        return f"{whose} architecture is {named} (the `architectures` of its `config.json`)"
    # vLLM may set the name itself from other flags (`--kv-offloading-size` picks OffloadingConnector): say the lever,
    # not that it is the only way
    if sel.key:
        return f"the {sel.what} in use is {among} (the {code(sel.key)} key of {code(sel.flag)} names it)"
    if sel.automatic:
        which = f"the {sel.what} {among}" if one else among
        return f"vLLM uses {which} (picked for your GPU and model, or named with {code(sel.flag)})"
    return f"the {sel.what} in use is {among} (named with {code(sel.flag)})"


def runs_only_when(found: Sequence[Selection]) -> str:
    """The sentence a page's meaning gets."""
    return f"Within vLLM, this code runs only when {' or '.join(_clause(s) for s in found)}: vLLM imports it for no other."


def ways_around(found: Sequence[Selection]) -> list[str]:
    """What a user can choose instead, so that the code does not run: one for each flag that selects it (a model's
    architecture is the model itself, no way around)."""
    ways = []
    for s in found:
        sel, names = s.selector, _names(s.names)
        if not sel.flag:
            continue
        if sel.key:
            ways.append(f"Select another {sel.what} with the {code(sel.key)} key of {code(sel.flag)} (this code runs only with {names}).")
        elif sel.automatic:
            ways.append(f"Name another {sel.what} with {code(sel.flag)} (this code runs only with {names}).")
        else:
            ways.append(f"Use another {code(sel.flag)}, or none (this code runs only with {names}).")
    return ways
