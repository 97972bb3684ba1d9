"""The vLLM plugin: one line naming the error's page, after vLLM logs a fatal error or an exception ends a process.

vLLM calls every `vllm.general_plugins` entry point in each process it starts (the API server, the engine
core, each worker: `vllm.plugins.load_general_plugins`), after that process has configured its logging.
`register` then adds two observers, and nothing else:

- a logging handler on the `vllm` logger, at level ERROR: a record that carries an exception (vLLM's
  `logger.exception("EngineCore failed to start.")`, "WorkerProc failed to start.", "EngineCore encountered a
  fatal error.") is followed by `vllm-errors: <title> — <url>` through the same logger;
- `sys.excepthook` and `threading.excepthook`, chained: an exception that ends the process or a thread is
  followed by the same line on standard error, after the traceback the previous hook printed.

The exception is looked up in the lookup index this install carries (the bundle; in a checkout, its last
build), with vLLM's own version, never over the network. Nothing runs on a path without an exception: the
handler's level keeps every record below ERROR from reaching it. The exception, its message and its
traceback are never touched, the plugin never raises (a failure of its own is swallowed), and
VLLM_ERRORS_PLUGIN=0 turns it off.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import traceback
from collections import deque
from functools import lru_cache

SWITCH = "VLLM_ERRORS_PLUGIN"
LOGGER = "vllm.vllm_errors"  # a child of vLLM's logger: the line is formatted and routed like vLLM's own
PREFIX = "vllm-errors: "
_state = {"registered": False}
_said: deque = deque(maxlen=32)  # exceptions already followed by a line (kept alive, so no id is reused)


def enabled() -> bool:
    return os.environ.get(SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


def register() -> None:
    """The entry point vLLM calls; safe to call more than once (vLLM may load plugins again in a process)."""
    try:
        if not enabled() or _state["registered"]:
            return
        _state["registered"] = True
        logging.getLogger("vllm").addHandler(FatalLogHandler())
        previous = sys.excepthook

        def excepthook(kind, value, tb):
            previous(kind, value, tb)
            _print_line(value)

        sys.excepthook = excepthook
        previous_thread = threading.excepthook

        def thread_excepthook(args):
            previous_thread(args)
            _print_line(args.exc_value)

        threading.excepthook = thread_excepthook
    except Exception:  # noqa: BLE001 (a plugin must never stop vLLM)
        pass


class FatalLogHandler(logging.Handler):
    """Follows a logged exception (level ERROR and above) with the line naming its page."""

    def __init__(self) -> None:
        super().__init__(level=logging.ERROR)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            error = record.exc_info[1] if record.exc_info else None
            if error is None or record.name == LOGGER:
                return
            line = line_for(error)
            if line:
                logging.getLogger(LOGGER).error(line)
        except Exception:  # noqa: BLE001
            pass

    def handleError(self, record: logging.LogRecord) -> None:  # never print logging's "--- Logging error ---"
        pass


def _print_line(error: BaseException | None) -> None:
    try:
        line = line_for(error) if error is not None else None
        if line:
            print(line, file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001
        pass


def line_for(error: BaseException) -> str | None:
    """`vllm-errors: <title> — <url>` for the error vLLM raised (the root cause of a chain when it is vLLM's),
    or None: an error no page answers, one already followed by a line, KeyboardInterrupt and SystemExit."""
    if isinstance(error, (KeyboardInterrupt, SystemExit)) or any(e is error for e in _said):
        return None
    found = _lookup("".join(traceback.format_exception(error)))
    _said.append(error)
    return found


def _lookup(text: str) -> str | None:
    from . import lookup

    site = _site()
    if site is None:
        return None
    paste = lookup.read_paste(text)
    version = _vllm_version()
    if version and not paste.version:
        from dataclasses import replace

        paste = replace(paste, version=version)
    answer = lookup.answer(site.index, paste, top=1)
    findings = [answer.finding] if answer.finding else []
    findings += [f for f in answer.context if f.kind == "vllm"]
    for finding in findings:
        if finding.kind in ("vllm", "wrapper") and finding.matches and finding.matches[0].confidence != "low":
            best = finding.matches[0]
            return f"{PREFIX}{best.title} — {site.page(best.id)}"
    return None


@lru_cache(maxsize=1)
def _site():
    """The index this install carries, else a checkout's last build; never the network."""
    from .bundle import bundled_site, local_site
    from .resources import IN_CHECKOUT, WORK_DIR

    site = bundled_site()
    if site is None and IN_CHECKOUT and (WORK_DIR / "build" / "site" / "api" / "lookup.json").is_file():
        site = local_site(WORK_DIR / "build" / "site")
    return site


def _vllm_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("vllm")
    except PackageNotFoundError:
        return None
