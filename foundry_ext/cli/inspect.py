"""``foundry-ext inspect CHECKPOINT``: time, LRs, schedulers and plateau state of a checkpoint, loaded safely.

The file is never trusted: :func:`foundry_ext.checkpoint.load_checkpoint_safely` runs no code from it, and every
input gets an answer: the rows of :func:`~foundry_ext.checkpoint.describe` (exit 0), or one line and exit 2 for a path
that is missing, a symlink loop, a FIFO/socket/device, not a torch file, truncated, not a Composer checkpoint, or
nested too deep (docs/cli.md lists them with their reasons).
"""

from __future__ import annotations

import argparse

from foundry_ext.cli import UsageError

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``CHECKPOINT``."""
    parser.add_argument(
        "checkpoint",
        metavar="CHECKPOINT",
        help="a checkpoint file (ep0-ba10-rank0.pt), a sharded checkpoint folder, a latest-rank0.pt symlink, or a save "
        "folder (its latest checkpoint, as anneal takes it)",
    )


def run(args: argparse.Namespace) -> int:
    """Load the checkpoint without trusting it and print what it holds."""
    # not describe yet: it imports torch, and a path that is not a torch file is refused without it
    from foundry_ext.checkpoint import CheckpointError, load_checkpoint_safely

    path = _latest_of_save_folder(args.checkpoint)
    try:
        checkpoint = load_checkpoint_safely(path)
    except CheckpointError as e:
        raise UsageError(" ".join(str(e).splitlines())) from None  # the messages are one line; keep it so
    except MemoryError:  # the limits of foundry_ext.checkpoint.limits should make this unreachable: still one line
        raise UsageError(f"{args.checkpoint}: ran out of memory reading it (not a checkpoint inspect reads)") from None
    from foundry_ext.checkpoint import describe

    print(describe(checkpoint, path))
    return 0


def _latest_of_save_folder(given: str) -> str:
    """A save folder (no ``.metadata``, a ``latest`` link of rank 0 inside) gives that link, said; else ``given``.

    The same rule as ``anneal``'s (:func:`foundry_ext.anneal.source.resolve_checkpoint`): one answer to "which
    checkpoint of this folder", the one Composer's autoresume would load.
    """
    import os

    from foundry_ext.anneal.source import LATEST_LINKS

    if not os.path.isdir(given) or os.path.exists(os.path.join(given, ".metadata")):
        return given
    for name in LATEST_LINKS:
        link = os.path.join(given, name)
        if os.path.lexists(link):
            print(f"{given} is a save folder: its latest checkpoint, {name}")
            return link
    return given  # refused below, in the reader's own words
