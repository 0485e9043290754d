""":class:`CheckpointError`, and the text helpers that keep its message (and ``describe``'s rows) to one line.

Paths, keys and error texts come from untrusted files: each is shown with newlines and other unprintable characters
escaped and long texts cut, so that a refusal is always one line.
"""

from __future__ import annotations

import re
from typing import Any

from foundry_ext.text import one_line

__all__ = ["UNSUPPORTED_GLOBAL", "CheckpointError", "brief_key", "first_line", "unreadable"]

# An unpickler's refusal of a global: torch words it "Unsupported global: GLOBAL x.y was not an allowed global" or
# "unsupported GLOBAL posix.system whose module posix is blocked", depending on the module
UNSUPPORTED_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")


class CheckpointError(Exception):
    """The path is not a checkpoint this module can read safely: one line that says why."""


def brief_key(key: Any) -> str:
    """A mapping key in a few printable characters: its repr for a scalar, its type's name otherwise."""
    if isinstance(key, (str, int, float, bool)) or key is None:
        return one_line(repr(key)[:200]) if not isinstance(key, str) else one_line(key[:200])
    return type(key).__name__


def first_line(error: BaseException | str) -> str:
    """The line of a reader's error that says what went wrong (torch puts it after a preamble), at most 300 chars."""
    text = str(error).strip()
    if "WeightsUnpickler error:" in text:
        text = text.split("WeightsUnpickler error:", 1)[1]
    elif text.startswith("Weights only load failed."):  # the reason is on the next line
        text = text.split("\n", 1)[-1]
    line = text.strip().splitlines()[0] if text.strip() else ""
    # "27" alone says nothing, and a Python exception's name is not for the user (issue 46: no exception name in a
    # refusal): what went wrong, in words
    for kind, words in _WHAT_WENT_WRONG:
        if isinstance(error, kind):
            line = f"{words}: {line}" if line else words
            break
    return one_line((line or "unreadable")[:300])


_WHAT_WENT_WRONG: tuple[tuple[type[BaseException], str], ...] = (
    (KeyError, "a missing key"),
    (IndexError, "a record cut short or out of range"),
    (TypeError, "a value of the wrong type"),
    (AttributeError, "a missing attribute"),
    (AssertionError, "a failed consistency check"),
)


def unreadable(origin: str, error: BaseException | str) -> CheckpointError:
    """The refusal of a file that looks like a torch file but cannot be read to its end."""
    return CheckpointError(
        f"{origin} is not a readable torch checkpoint (truncated, or not written by torch.save): {first_line(error)}"
    )
