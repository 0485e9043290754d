"""Whether a process of this host is still running: the one answer for the demo-data lock and the folder owner."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["pid_alive"]


def pid_alive(pid: Any) -> bool:
    """Whether ``pid`` names a live process here; anything but a positive int (a hand-edited record) is not one.

    Signal 0 checks existence without sending anything; ``PermissionError`` means the process exists under another
    user.
    """
    if type(pid) is not int or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
