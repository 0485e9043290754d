r"""One printable line from any text: the one place an error line escapes what it quotes.

Paths, keys, values and error texts come from untrusted files and from what a user typed (``--decay $'\r'``). Shown
as they are, a newline would split the one-line error and a ``\r`` would overwrite its start; each is escaped here
instead, so every message of the package stays one line. Standard library only: the CLI's help, the checkpoint
readers and the config checks all use it.
"""

from __future__ import annotations

import os

__all__ = ["one_line"]


def one_line(text: str | os.PathLike[str]) -> str:
    r"""``text`` with every character that is not printable escaped as Python writes it (``\r``, ``\x00``, ``\u2028``).

    Lone surrogates (a file name that is not UTF-8) are escaped too. Printable text comes back unchanged.
    """
    text = os.fspath(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
