"""Warnings about a config, each printed once per process: by the pre-flight check or by the scheduler, not both.

The pre-flight check (:mod:`foundry_ext.catalog.preflight`, run by llm-foundry before it builds anything) and the
scheduler's first call (while the Trainer is built) can both find, say, a warmup longer than the run; the user gets one
line.
"""

from __future__ import annotations

import logging
import os

__all__ = ["warn_once"]

log = logging.getLogger("foundry_ext")
_seen: set[str] = set()


def warn_once(message: str) -> bool:
    """Log ``message`` as one warning line on global rank 0, unless this process did already; True if logged now."""
    if message in _seen:
        return False
    _seen.add(message)
    if os.environ.get("RANK", "0") == "0":
        # llm-foundry configures logging only after the pre-flight check: without a handler, Python's last resort
        # prints the bare message to stderr, which is what we want
        log.warning("foundry-ext: warning: %s", message)
    return True
