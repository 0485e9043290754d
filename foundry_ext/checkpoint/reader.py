""":func:`load_checkpoint_safely`: which checks a path gets, in which order; is the result a Composer checkpoint.

The path is ``stat``-ed first (:mod:`~foundry_ext.checkpoint.paths`); a folder is read as a sharded checkpoint
(:mod:`~foundry_ext.checkpoint.sharded`), a regular file as a ``torch.save`` file
(:mod:`~foundry_ext.checkpoint.torch_file`). Nothing here imports torch: a path refused before its bytes could be a
torch file is answered without it.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from itertools import islice
from pathlib import Path
from typing import Any

from foundry_ext.checkpoint.errors import CheckpointError, brief_key
from foundry_ext.checkpoint.paths import open_regular, stat_path
from foundry_ext.checkpoint.sharded import SHARDED_KEY, load_sharded
from foundry_ext.checkpoint.torch_file import load_torch_file
from foundry_ext.text import one_line

__all__ = ["load_checkpoint_safely"]


def load_checkpoint_safely(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load the Composer checkpoint at ``path`` on CPU without running code from it.

    Args:
        path (str | os.PathLike): A checkpoint file, a sharded checkpoint folder, or a symlink to either.

    Returns:
        dict: The checkpoint: ``{"state": {...}, "rng": [...]}`` for a file. For a sharded folder, the non-tensor
        values nested the same way, plus :data:`~foundry_ext.checkpoint.sharded.SHARDED_KEY` with the counts of what
        was not loaded.

    Raises:
        CheckpointError: Missing, a symlink loop, not a regular file or folder, not a torch file, truncated, not a
            Composer checkpoint, nested deeper than :data:`~foundry_ext.checkpoint.pickle_check.MAX_DEPTH`, or it
            needs a type outside :data:`~foundry_ext.checkpoint.load.ALLOWED_GLOBALS`. The message is one line.
    """
    path = Path(path)
    shown = one_line(path)
    info = stat_path(path, shown)
    if stat.S_ISDIR(info.st_mode):
        checkpoint = load_sharded(path.resolve(), shown)
    else:
        with open_regular(path, shown, info) as f:
            checkpoint = load_torch_file(f, os.fstat(f.fileno()).st_size, shown)
        if isinstance(checkpoint, Mapping) and SHARDED_KEY in checkpoint:
            raise CheckpointError(
                f"{shown} holds the key {SHARDED_KEY!r}, which only foundry-ext adds when it reads a sharded folder: "
                "not a Composer checkpoint"
            )
    _check_composer(checkpoint, shown)
    return checkpoint


def _check_composer(checkpoint: Any, origin: str) -> None:
    if not isinstance(checkpoint, Mapping) or not isinstance(checkpoint.get("state"), Mapping):
        keys = (
            ", ".join(brief_key(k) for k in islice(checkpoint, 8))
            if isinstance(checkpoint, Mapping)
            else type(checkpoint).__name__
        )
        raise CheckpointError(
            f"{origin} is a torch file but not a Composer checkpoint (no 'state' dict; found: {keys})"
        )
    state = checkpoint["state"]
    if not any(k in state for k in ("timestamp", "model", "optimizers")):
        raise CheckpointError(
            f"{origin} is not a Composer checkpoint: its 'state' has none of timestamp, model, optimizers"
        )
