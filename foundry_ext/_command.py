"""A ``composer ...`` command line as the user can paste it into the shell they ran us from (issue 46).

``anneal`` and the spike guard's rollback print the command that runs what they wrote. ``composer train.py X`` did
not paste where ``composer`` is not on ``PATH`` (a project's ``.venv``, as every command of the docs runs it), and
absolute paths made it long and unlike the docs. Here: the ``composer`` next to the running Python when the one on
``PATH`` is another (or none), paths relative to the working folder when inside it, every word ``shlex``-quoted.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys

__all__ = ["composer_command", "shown_path"]


def shown_path(path: str) -> str:
    """``path`` relative to the working folder when it is inside it (``runs/x/ep0-ba8-rank0.pt``), else as given."""
    try:
        absolute = os.path.abspath(path)
        relative = os.path.relpath(absolute)
    except ValueError:  # an unusual path (a NUL, another drive): shown as given
        return path
    return relative if not relative.startswith(os.pardir) else path


def _composer() -> str:
    """``composer`` when that name runs the launcher beside us, else the path of that launcher.

    Beside us: in the folder of the command the user typed (``.venv/bin/foundry-ext`` gives ``.venv/bin/composer``,
    as they would type it), else beside the running Python (a training rank, started by the launcher's Python).
    """
    typed = sys.argv[0] if sys.argv and os.path.dirname(sys.argv[0]) else ""
    for folder in (os.path.dirname(typed), os.path.dirname(sys.executable)):
        beside = os.path.join(folder, "composer")
        if folder and os.path.isfile(beside):
            on_path = shutil.which("composer")
            if on_path is not None and os.path.realpath(on_path) == os.path.realpath(beside):
                return "composer"
            return shown_path(beside)
    return "composer"  # none beside us (an in-process Trainer in another environment): the usual name


def composer_command(*args: str, processes: int = 1) -> str:
    """``composer [-n N] ARGS...`` to paste: the launcher that runs with this Python, each word quoted for the shell.

    Args:
        *args: The launcher's arguments (``train.py``, the YAML, ``key=value`` overrides); paths are shown as given.
        processes (int): Processes per node (``-n``); omitted when 1.
    """
    words = [_composer(), *(["-n", str(processes)] if processes > 1 else []), *args]
    return shlex.join(words)
