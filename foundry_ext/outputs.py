"""Where a command may write: the one rule for every ``--out``, ``--csv`` and ``--json`` of ``foundry-ext``.

A missing folder is refused, before any work, in one line that names the option and the folder (a typo in a path
fails at once, never after a long range test). The one exception is ``out/``, the folder every command of the docs
writes into (ignored by git): it, and folders under it, are made on demand, so that the docs' commands run as
written in a fresh clone. The refusal says so, so that ``--out plots/lr.png`` refused beside ``--out out/lr.png``
made reads as one rule, not two. A path that is a folder is refused too (:func:`output_problem`): matplotlib saved
``--out out`` beside the folder, as ``out.png``, while the command said it wrote ``out``.
"""

from __future__ import annotations

import contextlib
import os

__all__ = ["OUTPUT_FOLDER", "make_output_folder", "missing_folder", "output_problem"]

#: The folder the docs write every output into (ignored by git): made on demand, unlike any other missing folder.
OUTPUT_FOLDER = "out"


def make_output_folder(path: str | None) -> None:
    """Make the folder of ``path`` when it is ``out/`` or under it (``out/lr.png``, ``out/avg/avg.pt``).

    Anything else is left to :func:`missing_folder`; a folder that cannot be made is left to it too.
    """
    folder = os.path.dirname(os.path.normpath(path)) if isinstance(path, str) else ""
    if folder.split(os.sep)[0] == OUTPUT_FOLDER:
        with contextlib.suppress(OSError):
            os.makedirs(folder, exist_ok=True)


def missing_folder(option: str, path: str | os.PathLike[str] | None) -> str | None:
    """The refusal of ``option path`` when the folder it would be written in does not exist, else ``None``."""
    if path is None:
        return None
    # not os.path.abspath, which drops "sub/.." by its text: the system resolves it only if sub exists
    folder = os.path.dirname(os.path.join(os.getcwd(), os.fspath(path)))
    if os.path.isdir(folder):
        return None
    return (
        f"{option} {os.fspath(path)}: the folder {folder} does not exist; make it first "
        f"(only {OUTPUT_FOLDER}/, the docs' output folder, is made for you)"
    )


def output_problem(option: str, path: str | os.PathLike[str] | None, example: str = "out") -> str | None:
    """The refusal of ``option path`` as a file to write, else ``None``.

    Refused: its folder is missing (:func:`missing_folder`), or it is a folder itself (``example`` names a file in it
    for the line).
    """
    problem = missing_folder(option, path)
    if problem is None and path is not None and os.path.isdir(path):
        shown = os.fspath(path)
        problem = f"{option} {shown}: is a folder; expected a file name, e.g. {os.path.join(shown, example)}"
    return problem
