"""Warnings about a config, each printed once per process: by the pre-flight check or by the scheduler, not both.

The pre-flight check (:mod:`foundry_ext.catalog.preflight`, run by llm-foundry before it builds anything) and the
scheduler's first call (while the Trainer is built) can both find, say, a warmup longer than the run; the user gets one
line.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["warn_once"]


class _StderrHandler(logging.Handler):
    """Writes the bare record to the current ``sys.stderr`` (looked up at each line, as pytest swaps it)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(self.format(record), file=sys.stderr, flush=True)


# Its own handler, not propagated: under llm-foundry's root format (``%(levelname)s: %(name)s: %(message)s``) a
# propagated line read "WARNING: foundry_ext: foundry-ext: warning: ..."; now it is "foundry-ext: warning: ..."
# whoever configured logging. Add a handler to this logger to receive the lines elsewhere.
log = logging.getLogger("foundry_ext.notices")
log.propagate = False
log.addHandler(_StderrHandler())
_seen: set[str] = set()


def warn_once(message: str) -> bool:
    """Log ``message`` as one warning line on global rank 0, unless this process did already; True if logged now."""
    if message in _seen:
        return False
    _seen.add(message)
    if os.environ.get("RANK", "0") == "0":
        log.warning("foundry-ext: warning: %s", message)
    return True
