"""The one error of the run-log reader."""

from __future__ import annotations

__all__ = ["RunLogError"]


class RunLogError(ValueError):
    """A run log that cannot be read: one line naming the file (and line or key), the value and what is allowed."""
