"""What a path is, decided from ``stat`` before anything is opened; and opening a regular file without blocking.

* only regular files and folders are opened: a FIFO, socket or device is refused from its ``stat`` (opening a FIFO for
  reading blocks until a writer appears), and files are opened with ``O_NONBLOCK``;
* a symlink loop is named as such (``os.stat`` fails with ``ELOOP``), a dangling symlink with its target;
* every failure is one :class:`~foundry_ext.checkpoint.errors.CheckpointError` line.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO

from foundry_ext.checkpoint.errors import CheckpointError
from foundry_ext.text import one_line

__all__ = ["open_regular", "stat_path"]


def stat_path(path: Path, shown: str) -> os.stat_result:
    """``os.stat`` (symlinks followed), with a one-line reason when it fails."""
    try:
        return os.stat(path)
    except ValueError as e:  # an embedded NUL byte
        raise CheckpointError(f"{shown} is not a valid path: {e}") from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise CheckpointError(_loop_message(path, shown)) from None
        if e.errno == errno.ENOENT and os.path.islink(path):
            chain, _ = _symlink_chain(path)
            raise CheckpointError(f"{shown} is a symlink to {' -> '.join(chain[1:])}, which does not exist") from None
        if e.errno == errno.ENOENT:
            raise CheckpointError(f"no such file or folder: {shown}") from None
        raise CheckpointError(f"cannot read {shown}: {e.strerror}") from None


def _symlink_chain(path: Path, hops: int = 40) -> tuple[list[str], bool]:
    """``[path, target, target's target, ...]`` as written in the links, and whether the chain comes back on itself."""
    chain = [one_line(path)]
    seen: set[str] = set()
    current = str(path)
    for _ in range(hops):
        key = os.path.abspath(current)
        if key in seen:
            return chain, True
        seen.add(key)
        if not os.path.islink(current):
            return chain, False
        target = os.readlink(current)
        chain.append(one_line(target))
        current = os.path.join(os.path.dirname(current), target)  # an absolute target replaces the folder
    return chain, True


def _loop_message(path: Path, shown: str) -> str:
    chain, loop = _symlink_chain(path)
    if loop and len(chain) > 1:
        return f"{shown} is a symlink loop: {' -> '.join(chain)}"
    # the loop is in a folder on the way (dir/x with dir -> dir), or the chain is longer than the kernel follows
    return f"{shown}: too many levels of symbolic links (a symlink loop in its path)"


def _file_kind(mode: int) -> str | None:
    """What a non-regular, non-folder path is, or None for a regular file or a folder."""
    for test, kind in (
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) or stat.S_ISDIR(mode) else "not a regular file"


def open_regular(path: Path, shown: str, info: os.stat_result | None = None) -> IO[bytes]:
    """Open a regular file for reading; never open anything else, never block.

    A FIFO, socket or device is refused from its ``stat`` without being opened: opening a FIFO for reading blocks
    until a writer appears, and opening some devices has side effects. ``O_NONBLOCK`` covers the file being swapped
    for a FIFO between the ``stat`` and the ``open``; the ``fstat`` afterwards refuses such a swap.
    """
    info = info or stat_path(path, shown)
    kind = _file_kind(info.st_mode)
    if kind is not None or stat.S_ISDIR(info.st_mode):
        raise CheckpointError(
            f"{shown} is {kind or 'a folder'}, not a checkpoint: only regular files (and sharded checkpoint folders) "
            "are read"
        )
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise CheckpointError(f"cannot open {shown}: {e.strerror}") from None
    opened = os.fstat(fd)
    if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
        os.close(fd)
        raise CheckpointError(f"{shown} was replaced while it was being opened; try again")
    return os.fdopen(fd, "rb")
