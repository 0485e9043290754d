"""The non-tensor values of a sharded checkpoint folder (torch.distributed.checkpoint), read without a process group.

FSDP with ``state_dict_type: sharded`` writes ``.metadata`` plus ``__<rank>_0.distcp`` files. The non-tensor values
(timestamp, schedulers, callbacks, param-group LRs, ...) are read from their byte ranges, each as a ``torch.save``
file (:func:`~foundry_ext.checkpoint.torch_file.load_torch_file`); tensors (model and optimizer shards) are not
loaded. ``.metadata`` is a plain pickle of ``torch.distributed.checkpoint`` dataclasses: it is walked first, then
unpickled with only those classes allowed.

torch is imported only once ``.metadata`` is being unpickled, so a folder without it is answered without torch.
"""

from __future__ import annotations

import io
import os
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from foundry_ext.checkpoint.dcp_metadata import MetadataUnpickler
from foundry_ext.checkpoint.errors import UNSUPPORTED_GLOBAL, CheckpointError, first_line
from foundry_ext.checkpoint.limits import check_value_sizes
from foundry_ext.checkpoint.paths import open_regular
from foundry_ext.checkpoint.pickle_check import MAX_DEPTH, MAX_PICKLE_BYTES, Capped, walk_pickle
from foundry_ext.checkpoint.torch_file import load_torch_file
from foundry_ext.text import one_line

__all__ = ["SHARDED_KEY", "load_sharded", "read_metadata"]

SHARDED_KEY = "foundry_ext_sharded"
"""Key that :func:`load_sharded` adds to a sharded checkpoint's dict: what was and was not read."""


def load_sharded(folder: Path, shown: str) -> dict[str, Any]:
    """The non-tensor values of the sharded checkpoint ``folder``, nested as in the state dict.

    Args:
        folder (Path): The checkpoint folder, symlinks resolved.
        shown (str): How it is named in a refusal (as the user gave it).

    Returns:
        dict: The values, plus :data:`SHARDED_KEY` with the counts of what was not loaded and the shard files.

    Raises:
        CheckpointError: No ``.metadata``, or it or a shard is refused (the message says which and why).
    """
    metadata = read_metadata(folder, shown)
    try:
        return _read_shards(folder, shown, metadata)
    except CheckpointError:
        raise
    except (AttributeError, TypeError, ValueError, KeyError, OSError) as e:  # dataclasses with unexpected fields
        raise CheckpointError(
            f"{shown}/.metadata is not valid torch.distributed.checkpoint metadata: {first_line(e)}"
        ) from None


def read_metadata(folder: Path, shown: str) -> Any:
    """The unpickled ``.metadata`` of the sharded checkpoint ``folder``: walked first, then only DCP's types allowed.

    Also ``foundry-ext average``'s way into a sharded folder (:mod:`foundry_ext.average.sharded`).

    Raises:
        CheckpointError: No ``.metadata``, or it is refused (the message says why).
    """
    meta_path = folder / ".metadata"
    meta_shown = f"{shown}/.metadata"
    if not os.path.lexists(meta_path):
        raise CheckpointError(
            f"{shown} is a folder but not a sharded checkpoint (no .metadata); pass a checkpoint file or folder"
        )
    with open_regular(meta_path, meta_shown) as f:
        walk_pickle(Capped(f, MAX_PICKLE_BYTES, meta_shown), meta_shown)
        f.seek(0)
        try:
            metadata = MetadataUnpickler(f).load()
        except pickle.UnpicklingError as e:
            needed = UNSUPPORTED_GLOBAL.search(str(e))
            if needed:
                raise CheckpointError(
                    f"refusing to load {meta_shown}: it needs {needed.group(1)}, which is not on the allow-list of "
                    "torch.distributed.checkpoint types"
                ) from None
            raise CheckpointError(f"{meta_shown} is not readable (truncated?): {first_line(e)}") from None
        except Exception as e:  # untrusted bytes: any failure of the unpickler means unreadable
            raise CheckpointError(f"{meta_shown} is not readable (truncated?): {first_line(e)}") from None
    return metadata


def _read_shards(folder: Path, shown: str, metadata: Any) -> dict[str, Any]:
    # imports torch, unless unpickling .metadata did (it may have named no torch class at all)
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata, Metadata

    if not isinstance(metadata, Metadata):
        raise CheckpointError(f"{shown}/.metadata is not torch.distributed.checkpoint metadata")
    paths = metadata.planner_data if isinstance(metadata.planner_data, dict) else {}
    storage = {index.fqn: info for index, info in (metadata.storage_data or {}).items()}
    flat: dict[tuple[Any, ...], Any] = {}
    files: dict[str, tuple[IO[bytes], int]] = {}
    tensors = unread = 0
    check_value_sizes(_declared_lengths(metadata, storage, BytesStorageMetadata), shown)
    try:
        for fqn, item in dict(metadata.state_dict_metadata).items():
            if not isinstance(item, BytesStorageMetadata):
                tensors += 1
                continue
            info = storage.get(fqn)
            if info is None or getattr(info, "transform_descriptors", None):
                unread += 1  # no location, or stored compressed: not shown
                continue
            name, offset, length = info.relative_path, info.offset, info.length
            if not (isinstance(name, str) and name == os.path.basename(name) and name not in ("", ".", "..")):
                raise CheckpointError(f"{shown}/.metadata names a shard outside the folder: {one_line(repr(name))}")
            if name not in files:
                f = open_regular(folder / name, f"{shown}/{one_line(name)}")
                files[name] = (f, os.fstat(f.fileno()).st_size)
            f, size = files[name]
            if not (type(offset) is int and type(length) is int and 0 <= offset and 0 <= length):
                raise CheckpointError(f"{shown}/.metadata gives {one_line(str(fqn))} an invalid byte range")
            if offset + length > size:
                raise CheckpointError(f"{shown}/{one_line(name)} is truncated: {one_line(str(fqn))} is cut short")
            f.seek(offset)
            data = f.read(length)
            keys = paths.get(fqn, str(fqn).split("."))
            if not isinstance(keys, (list, tuple)) or not keys or len(keys) > MAX_DEPTH:
                raise CheckpointError(f"{shown}/.metadata gives {one_line(str(fqn))} an invalid key path")
            if not all(isinstance(k, (str, int)) for k in keys):
                raise CheckpointError(f"{shown}/.metadata gives {one_line(str(fqn))} an invalid key path")
            flat[tuple(keys)] = load_torch_file(io.BytesIO(data), length, f"{shown} ({one_line(str(fqn))})")
    finally:
        for f, _ in files.values():
            f.close()
    checkpoint = _nest(flat, shown)
    checkpoint[SHARDED_KEY] = {
        "tensors": tensors,
        "unread": unread,
        "files": sorted(p.name for p in folder.glob("*.distcp")),
    }
    return checkpoint


def _declared_lengths(metadata: Any, storage: Mapping[Any, Any], bytes_type: type) -> dict[str, int]:
    """The byte length ``.metadata`` declares for each non-tensor value, before any value is read.

    Only int lengths: anything else is refused value by value in :func:`_read_shards`.
    """
    lengths = {}
    for fqn, item in dict(metadata.state_dict_metadata).items():
        info = storage.get(fqn)
        length = getattr(info, "length", None)
        if isinstance(item, bytes_type) and type(length) is int:
            lengths[str(fqn)] = length
    return lengths


def _nest(flat: Mapping[tuple[Any, ...], Any], shown: str) -> dict[str, Any]:
    root: dict[Any, Any] = {}
    for keys, value in flat.items():
        node = root
        dotted = one_line(".".join(map(str, keys)))
        for key in keys[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):  # a value was read at this path already
                raise CheckpointError(f"{shown}/.metadata has conflicting key paths at {dotted}")
        if keys[-1] in node:
            raise CheckpointError(f"{shown}/.metadata has conflicting key paths at {dotted}")
        node[keys[-1]] = _Leaf(value)
    return _listify(root)


class _Leaf:
    """A value read from a shard, kept apart from the dicts :func:`_nest` makes, until :func:`_listify` unwraps it."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _listify(node: dict[Any, Any] | _Leaf) -> Any:
    """Turn the ``{0: a, 1: b}`` dicts that flattening made of lists back into lists (depth <= :data:`MAX_DEPTH`).

    Values read from the shards are left as they were saved.
    """
    if isinstance(node, _Leaf):
        return node.value
    node = {k: _listify(v) for k, v in node.items()}
    if node and all(type(k) is int for k in node) and sorted(node) == list(range(len(node))):
        return [node[i] for i in range(len(node))]
    return node
