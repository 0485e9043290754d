r"""The weighted average of sharded checkpoints (``torch.distributed.checkpoint``), chunk by chunk, file by file.

No process group and no gather: a sharded folder holds, per ``.distcp`` file, each model tensor's chunks as
separate ``torch.save`` records at byte ranges that ``.metadata`` lists. The average of chunk :math:`c` is

.. math::
    \bar\theta_c = \sum_{i=1}^{n} w_i\, \theta_{i,c}

read from each input's own file and range, accumulated oldest first as the full average is (``float32``, or
``float64`` for ``float64`` weights), and written in the chunk's dtype. At any time one chunk of each of: the
accumulator, the chunk being read (its bytes and its tensor) and the record being written is held, so memory is
bounded by a few of the largest chunk (at most one shard of the largest tensor), whatever the model's size: the C
torch.save's cycles are collected and the heap given back after each chunk (:mod:`foundry_ext.average.heap`).

The output is the newest input's folder with its model chunks replaced: the other records (optimizer state,
timestamp, schedulers, RNG, ...) are copied byte for byte, and a new ``.metadata`` gives each record its new byte
range. Every record is read with the safe reader of :mod:`foundry_ext.checkpoint` (sniffed, its pickle walked, loaded
with ``weights_only`` and an allow-list), as ``inspect`` reads a shard's values.
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import torch
from torch.distributed.checkpoint.metadata import Metadata, MetadataIndex, TensorStorageMetadata

from foundry_ext.average.full import accumulator_dtype, check_finite
from foundry_ext.average.heap import release_freed_memory
from foundry_ext.average.options import AverageError
from foundry_ext.average.source import Header

__all__ = ["ShardedInput", "average_sharded", "check_same_layout", "read_layout"]

_COPY_BLOCK = 4 * 2**20  # the other records are copied in blocks of this size, never whole
_RECORD_SLACK = 64 * 2**10  # torch.save's zip around a chunk's bytes: a few hundred bytes; refuse far more


@dataclass
class ShardedInput:
    """One sharded input: its header, its ``.metadata``, and its model chunks (index -> file, offset, length)."""

    header: Header
    metadata: Metadata
    layout: dict[str, tuple[tuple[int, ...], torch.dtype, tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]]]
    chunks: dict[MetadataIndex, tuple[str, int, int]]


def _is_model(metadata: Metadata, fqn: str) -> bool:
    path = metadata.planner_data.get(fqn) if isinstance(metadata.planner_data, dict) else None
    return isinstance(path, (list, tuple)) and len(path) >= 3 and tuple(path[:2]) == ("state", "model")


def read_layout(header: Header) -> ShardedInput:
    """Read ``header``'s ``.metadata`` (safely) and list its model tensors, their chunks and where each is stored.

    Raises:
        AverageError: unreadable metadata, no model tensors, or a chunk stored compressed or out of its folder.
    """
    from foundry_ext.checkpoint import CheckpointError
    from foundry_ext.checkpoint.sharded import read_metadata

    item = header.item
    try:
        metadata = read_metadata(item.path, item.shown)
    except CheckpointError as e:
        raise AverageError(f"CKPT {item.shown}: {' '.join(str(e).splitlines())}") from None
    layout: dict[str, Any] = {}
    for fqn, md in dict(metadata.state_dict_metadata).items():
        if isinstance(md, TensorStorageMetadata) and _is_model(metadata, fqn):
            chunks = tuple(sorted((tuple(c.offsets), tuple(c.sizes)) for c in md.chunks))
            layout[fqn] = (tuple(md.size), md.properties.dtype, chunks)
    if not layout:
        raise AverageError(f"CKPT {item.shown}: its .metadata lists no model tensors (state.model)")
    chunks: dict[MetadataIndex, tuple[str, int, int]] = {}
    for index, info in (metadata.storage_data or {}).items():
        if index.fqn not in layout:
            continue
        name, offset, length = info.relative_path, info.offset, info.length
        if not (isinstance(name, str) and name == os.path.basename(name) and name not in ("", ".", "..")):
            raise AverageError(f"CKPT {item.shown}: its .metadata names a shard outside the folder: {name!r}")
        if getattr(info, "transform_descriptors", None):
            raise AverageError(f"CKPT {item.shown}: {index.fqn} is stored compressed; average reads plain records")
        if not (type(offset) is int and type(length) is int and offset >= 0 and length >= 0):
            raise AverageError(f"CKPT {item.shown}: its .metadata gives {index.fqn} an invalid byte range")
        chunks[MetadataIndex(index.fqn, index.offset)] = (name, offset, length)
    return ShardedInput(header, metadata, layout, chunks)


def check_same_layout(reference: ShardedInput, other: ShardedInput) -> None:
    """Refuse ``other`` unless its model tensors and their chunks are ``reference``'s (the first difference)."""
    a, b = reference.header.item.shown, other.header.item.shown
    for fqn in sorted(reference.layout.keys() | other.layout.keys()):
        mine, theirs = other.layout.get(fqn), reference.layout.get(fqn)
        if mine == theirs:
            continue
        if mine is None or theirs is None:
            has, lacks = (a, b) if mine is None else (b, a)
            raise AverageError(
                f"CKPT {b}: model tensor {fqn[:200]!r} is in {has} but not in {lacks}; average checkpoints of one model"
            )
        for what, k in (("shape", 0), ("dtype", 1), ("shard layout (chunk offsets and sizes)", 2)):
            if mine[k] != theirs[k]:
                shown_mine = mine[k] if k < 2 else f"{len(mine[k])} chunks {list(mine[k])[:2]}..."
                shown_theirs = theirs[k] if k < 2 else f"{len(theirs[k])} chunks {list(theirs[k])[:2]}..."
                raise AverageError(
                    f"CKPT {b}: model tensor {fqn[:200]!r} has {what} {shown_mine}, {a} {shown_theirs}; average "
                    "checkpoints of one model saved on the same number of ranks"
                )
    missing = reference.chunks.keys() - other.chunks.keys()
    if missing:
        index = min(missing, key=lambda i: i.fqn)
        raise AverageError(f"CKPT {b}: its .metadata has no stored record of {index.fqn} at {tuple(index.offset)}")


class _Files:
    """The ``.distcp`` files of the inputs, each opened once (safely: regular files only, without blocking)."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack
        self._open: dict[tuple[Path, str], tuple[IO[bytes], int]] = {}

    def get(self, item: ShardedInput, name: str) -> tuple[IO[bytes], int]:
        from foundry_ext.checkpoint import CheckpointError
        from foundry_ext.checkpoint.paths import open_regular

        key = (item.header.item.path, name)
        if key not in self._open:
            try:
                f = self._stack.enter_context(open_regular(key[0] / name, f"{item.header.item.shown}/{name}"))
            except CheckpointError as e:
                raise AverageError(f"CKPT {item.header.item.shown}: {' '.join(str(e).splitlines())}") from None
            self._open[key] = (f, os.fstat(f.fileno()).st_size)
        return self._open[key]


def _read_chunk(
    item: ShardedInput, index: MetadataIndex, sizes: tuple[int, ...], dtype: torch.dtype, files: _Files
) -> torch.Tensor:
    """One model chunk of ``item``: its byte range read and loaded by the safe reader, checked against ``.metadata``."""
    from foundry_ext.checkpoint import CheckpointError
    from foundry_ext.checkpoint.torch_file import load_torch_file

    name, offset, length = item.chunks[index]
    shown = f"{item.header.item.shown}/{name}"
    f, size = files.get(item, name)
    expected = torch.Size(sizes).numel() * torch.empty((), dtype=dtype).element_size()
    if offset + length > size:
        raise AverageError(f"CKPT {item.header.item.shown}: {name} is truncated: {index.fqn} is cut short")
    if length > expected + _RECORD_SLACK:
        raise AverageError(
            f"CKPT {item.header.item.shown}: .metadata gives {index.fqn} {length} bytes for {expected} bytes of "
            "weights; refused before reading it"
        )
    f.seek(offset)
    data = f.read(length)
    try:
        tensor = load_torch_file(io.BytesIO(data), length, f"{shown} ({index.fqn})")
    except CheckpointError as e:
        raise AverageError(f"CKPT {item.header.item.shown}: {' '.join(str(e).splitlines())}") from None
    if not isinstance(tensor, torch.Tensor) or tuple(tensor.shape) != tuple(sizes) or tensor.dtype != dtype:
        raise AverageError(
            f"CKPT {item.header.item.shown}: the record of {index.fqn} in {name} is not the {dtype} chunk of shape "
            f"{tuple(sizes)} its .metadata declares"
        )
    return tensor


def _copy(src: IO[bytes], offset: int, length: int, dst: IO[bytes]) -> None:
    src.seek(offset)
    left = length
    while left:
        block = src.read(min(left, _COPY_BLOCK))
        if not block:
            raise OSError("short read")
        dst.write(block)
        left -= len(block)


def average_sharded(
    inputs: list[ShardedInput], weights: list[float], folder: Path, progress: Callable[[str], None]
) -> dict[str, int]:
    """Write the average of ``inputs`` (oldest first) into the new folder ``folder``, file by file.

    Returns:
        dict: ``chunks`` averaged, ``copied`` records, ``largest_chunk_bytes`` (what bounds the memory held).
    """
    newest = inputs[-1]
    meta = newest.metadata
    storage: dict[MetadataIndex, Any] = dict(meta.storage_data)
    by_file: dict[str, list[tuple[MetadataIndex, Any]]] = {}
    for index, info in storage.items():
        by_file.setdefault(info.relative_path, []).append((index, info))
    new_storage: dict[MetadataIndex, Any] = {}
    stats = {"chunks": 0, "copied": 0, "largest_chunk_bytes": 0}
    with ExitStack() as stack:
        files = _Files(stack)
        for n, name in enumerate(sorted(by_file)):
            progress(f"[{n + 1}/{len(by_file)}] {name}: {len(by_file[name])} records")
            src, _ = files.get(newest, name)
            with open(folder / name, "xb") as out:
                for index, info in sorted(by_file[name], key=lambda pair: pair[1].offset):
                    start = out.tell()
                    key = MetadataIndex(index.fqn, index.offset)
                    spec = newest.layout.get(index.fqn)
                    if spec is not None and key in newest.chunks and spec[1].is_floating_point:
                        sizes = _sizes_of(spec, index)
                        acc = _weighted_chunk(inputs, weights, key, sizes, spec[1], files)
                        stats["largest_chunk_bytes"] = max(
                            stats["largest_chunk_bytes"], acc.numel() * acc.element_size()
                        )
                        torch.save(acc.to(spec[1]), out)
                        del acc
                        release_freed_memory()  # else each torch.save keeps its chunk until a full gc (heap.py)
                        stats["chunks"] += 1
                    else:
                        _copy(src, info.offset, info.length, out)
                        stats["copied"] += 1
                    new_storage[index] = dataclasses.replace(info, offset=start, length=out.tell() - start)
    storage_meta = meta.storage_meta
    if storage_meta is not None:
        storage_meta = dataclasses.replace(storage_meta, checkpoint_id=folder)
    new_meta = dataclasses.replace(meta, storage_data=new_storage, storage_meta=storage_meta)
    with open(folder / ".metadata", "xb") as f:
        pickle.dump(new_meta, f)  # as torch's FileSystemWriter.finish writes it
    return stats


def _sizes_of(spec: Any, index: MetadataIndex) -> tuple[int, ...]:
    for offsets, sizes in spec[2]:
        if offsets == tuple(index.offset):
            return sizes
    raise AverageError(f"{index.fqn}: no chunk at {tuple(index.offset)} in .metadata")


def _weighted_chunk(
    inputs: list[ShardedInput],
    weights: list[float],
    key: MetadataIndex,
    sizes: tuple[int, ...],
    dtype: torch.dtype,
    files: _Files,
) -> torch.Tensor:
    acc = torch.zeros(sizes, dtype=accumulator_dtype(dtype))
    with torch.no_grad():
        for item, w in zip(inputs, weights, strict=True):
            acc.add_(_read_chunk(item, key, sizes, dtype, files).to(acc.dtype), alpha=w)
        # A NaN or an infinity in any input makes the sum non-finite (even with weight 0: 0 * inf is NaN). Tested on
        # the sum, a scalar: an isfinite() per input chunk allocated a chunk-sized mask each time and raised the peak
        # (test_memory_stays_within_a_few_chunks...: 12.5 -> 21-25 MiB for 4 MiB chunks). Only then is each input
        # read again, to name the one that holds it; none does when the finite sum itself overflowed.
        if not bool(torch.isfinite(acc.sum())):
            for item in inputs:
                check_finite(_read_chunk(item, key, sizes, dtype, files), item.header.item.shown, key.fqn)
    return acc
