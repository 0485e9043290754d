"""What an average needs to know of each checkpoint before reading its weights: its run and its batch.

Read with :func:`foundry_ext.checkpoint.load_checkpoint_safely`, the bounded, allow-listed reader of ``inspect`` and
``anneal`` (no code from a file runs; a hostile file is refused in one line). For a sharded folder that reads only
the non-tensor values; for a ``.pt`` file the tensors are mapped, not read.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from foundry_ext.average.options import AverageError
from foundry_ext.average.selection import Input

__all__ = ["Header", "in_order", "load", "read_header"]


@dataclass(frozen=True)
class Header:
    """The run (``state.run_name``) and batch (``state.timestamp``) of one input."""

    item: Input
    run_name: str | None
    batch: int


def load(item: Input) -> dict[str, Any]:
    """``item``'s checkpoint through the safe reader; its refusal becomes one :class:`AverageError` line."""
    from foundry_ext.checkpoint import CheckpointError, load_checkpoint_safely  # torch, once the paths are sound

    try:
        return load_checkpoint_safely(item.path)
    except CheckpointError as e:
        # the reader names the resolved path; the user knows it by the name given
        message = " ".join(str(e).splitlines()).replace(str(item.path), item.shown)
        raise AverageError(f"CKPT {item.shown}: {message}") from None
    except MemoryError:
        raise AverageError(
            f"CKPT {item.shown}: ran out of memory reading it (not a checkpoint average reads)"
        ) from None


def read_header(item: Input, checkpoint: Mapping[str, Any]) -> Header:
    """The run name and batch of a loaded checkpoint.

    Raises:
        AverageError: no timestamp, or one of the wrong type.
    """
    state = checkpoint["state"]
    try:
        batch = state["timestamp"]["Timestamp"]["batch"]
        batch = batch.item() if hasattr(batch, "item") else batch
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 0:
            raise TypeError(batch)
    except (KeyError, TypeError, IndexError, AttributeError, ValueError):
        raise AverageError(
            f"CKPT {item.shown}: not a Composer training checkpoint (no state.timestamp batch count)"
        ) from None
    run_name = state.get("run_name")
    return Header(item, run_name if isinstance(run_name, str) else None, int(batch))


def in_order(headers: list[Header]) -> list[Header]:
    """The headers oldest first, refused unless they are of one run and of different batches.

    Raises:
        AverageError: two run names, or two checkpoints of one batch.
    """
    first = headers[0]
    for h in headers[1:]:
        if h.run_name != first.run_name:
            raise AverageError(
                f"CKPT {h.item.shown}: of run {h.run_name!r}, not {first.run_name!r} as {first.item.shown}; "
                "average checkpoints of one run"
            )
    ordered = sorted(headers, key=lambda h: h.batch)
    for a, b in itertools.pairwise(ordered):
        if a.batch == b.batch:
            raise AverageError(
                f"CKPT {b.item.shown}: batch {b.batch}, as {a.item.shown}; average checkpoints of different batches"
            )
    return ordered
