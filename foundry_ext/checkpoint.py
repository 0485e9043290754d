"""Read Composer checkpoints without trusting them: no code from the file is ever run.

A Composer checkpoint is a pickle, and unpickling can call any function the file names (``os.system`` included).
:func:`load_checkpoint_safely` therefore loads with ``torch.load(weights_only=True)`` inside
``torch.serialization.safe_globals`` and an explicit allow-list (:data:`ALLOWED_GLOBALS`): the few non-tensor types
that Composer 0.32 writes, found by loading real checkpoints and reading each "Unsupported global" error. Anything
else is refused with a :class:`CheckpointError` that names the type it would have had to trust.

Three layouts are understood:

* a monolithic file (``ep0-ba10-rank0.pt``: DDP, or FSDP with ``state_dict_type: full``);
* a sharded folder (FSDP with ``state_dict_type: sharded``): ``.metadata`` plus ``__<rank>_0.distcp`` files written by
  ``torch.distributed.checkpoint``. The non-tensor values (timestamp, schedulers, callbacks, param-group LRs, ...) are
  read from their byte ranges without a process group; tensors (model and optimizer shards) are not loaded;
* a symlink to either (``latest-rank0.pt``, ``latest-sharded-rank0``), resolved first.

Compressed (``.pt.lz4``, ...) and tar checkpoints are not read: decompress or extract them first.
"""

from __future__ import annotations

import collections
import datetime
import io
import math
import os
import pickle
import re
import zipfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.torch_version import TorchVersion

__all__ = ["ALLOWED_GLOBALS", "SHARDED_KEY", "CheckpointError", "describe", "load_checkpoint_safely"]

# Besides what torch's weights-only unpickler accepts by default (tensors, storages, OrderedDict, torch dtypes, ...).
# Each entry is a type Composer 0.32 writes in a checkpoint made by llm-foundry 0.22:
#   timedelta: the wall-clock fields of state.timestamp; TorchVersion: state.metadata.torch_version;
#   numpy arrays, dtypes and uint32: numpy's RNG state under rng/ (and any numpy value a callback stores).
ALLOWED_GLOBALS: list[Any] = [
    datetime.timedelta,
    TorchVersion,
    collections.OrderedDict,
    np.ndarray,
    np.dtype,
    np._core.multiarray._reconstruct,
    # checkpoints written under numpy 1.x name it numpy.core.multiarray._reconstruct
    (np._core.multiarray._reconstruct, "numpy.core.multiarray._reconstruct"),
    np._core.multiarray.scalar,
    (np._core.multiarray.scalar, "numpy.core.multiarray.scalar"),
    # numpy 2 pickles an array's dtype by its class (the RNG state is uint32); plain numeric dtypes only
    *(
        getattr(np.dtypes, f"{name}DType")
        for name in (
            "Bool", "Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64",
            "Float16", "Float32", "Float64",
        )
    ),
]  # fmt: skip

SHARDED_KEY = "foundry_ext_sharded"
"""Key that :func:`load_checkpoint_safely` adds to a sharded checkpoint's dict: what was and was not read."""

# Types the .metadata of a sharded checkpoint may name (a plain pickle of torch.distributed.checkpoint dataclasses).
_METADATA_GLOBALS = {
    ("torch.distributed.checkpoint.metadata", name)
    for name in (
        "Metadata",
        "MetadataIndex",
        "ChunkStorageMetadata",
        "TensorStorageMetadata",
        "BytesStorageMetadata",
        "TensorProperties",
        "StorageMeta",
        "_MEM_FORMAT_ENCODING",
    )
} | {
    ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
    ("torch.serialization", "_get_layout"),
    ("torch", "Size"),
    ("pathlib", "PosixPath"),
    ("pathlib", "WindowsPath"),
    ("collections", "OrderedDict"),
}

# torch words it "Unsupported global: GLOBAL x.y was not an allowed global" or "unsupported GLOBAL posix.system whose
# module posix is blocked", depending on the module
_UNSUPPORTED_GLOBAL = re.compile(r"GLOBAL ([\w.]+)")
_NOT_ALLOWLISTED = re.compile(r"allowlisted via `add_safe_globals`, but got <class '([^']+)'>")


class CheckpointError(Exception):
    """The path is not a checkpoint this module can read safely: one line that says why."""


# -- loading ---------------------------------------------------------------------------------------------------------


def load_checkpoint_safely(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load the Composer checkpoint at ``path`` on CPU without running code from it.

    Args:
        path (str | os.PathLike): A checkpoint file, a sharded checkpoint folder, or a symlink to either.

    Returns:
        dict: The checkpoint: ``{"state": {...}, "rng": [...]}`` for a file. For a sharded folder, the non-tensor
        values nested the same way, plus :data:`SHARDED_KEY` with the counts of what was not loaded.

    Raises:
        CheckpointError: Missing, truncated or not a Composer checkpoint, or it needs a type outside
            :data:`ALLOWED_GLOBALS`.
    """
    target = _resolve(Path(path))
    if target.is_dir():
        checkpoint = _load_sharded(target)
    else:
        if target.name.endswith((".tar", ".tar.gz", ".tgz", ".lz4", ".gz", ".bz2", ".xz", ".zst")):
            raise CheckpointError(f"{path}: compressed or tar checkpoints are not read; decompress/extract it first")
        checkpoint = _torch_load(target, origin=str(path))
    _check_composer(checkpoint, str(path))
    return checkpoint


def _resolve(path: Path) -> Path:
    if path.is_symlink() and not path.exists():
        raise CheckpointError(f"{path} is a symlink to {os.readlink(path)}, which does not exist")
    if not path.exists():
        raise CheckpointError(f"no such file or folder: {path}")
    return path.resolve()


def _torch_load(source: Path | io.BytesIO, origin: str) -> Any:
    try:
        with torch.serialization.safe_globals(ALLOWED_GLOBALS):
            return torch.load(source, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        message = str(e)
        needed = _UNSUPPORTED_GLOBAL.search(message) or _NOT_ALLOWLISTED.search(message)
        if needed:
            raise CheckpointError(
                f"refusing to load {origin}: it needs {needed.group(1)}, which is not on the allow-list of types "
                "Composer checkpoints use (trusting it could run code from the file)"
            ) from None
        raise _unreadable(origin, message) from None
    except (RuntimeError, EOFError, ValueError, OSError, zipfile.BadZipFile) as e:
        raise _unreadable(origin, e) from None


def _unreadable(origin: str, error: BaseException | str) -> CheckpointError:
    return CheckpointError(
        f"{origin} is not a readable torch checkpoint (truncated, or not written by torch.save): {_first_line(error)}"
    )


def _first_line(error: BaseException | str) -> str:
    text = str(error).strip()
    if "WeightsUnpickler error:" in text:
        text = text.split("WeightsUnpickler error:", 1)[1]
    elif text.startswith("Weights only load failed."):  # the reason is on the next line
        text = text.split("\n", 1)[-1]
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


def _check_composer(checkpoint: Any, origin: str) -> None:
    if not isinstance(checkpoint, Mapping) or not isinstance(checkpoint.get("state"), Mapping):
        keys = (
            ", ".join(map(str, list(checkpoint)[:8])) if isinstance(checkpoint, Mapping) else type(checkpoint).__name__
        )
        raise CheckpointError(
            f"{origin} is a torch file but not a Composer checkpoint (no 'state' dict; found: {keys})"
        )
    state = checkpoint["state"]
    if not any(k in state for k in ("timestamp", "model", "optimizers")):
        raise CheckpointError(
            f"{origin} is not a Composer checkpoint: its 'state' has none of timestamp, model, optimizers"
        )


# -- sharded (torch.distributed.checkpoint) folders ------------------------------------------------------------------


class _MetadataUnpickler(pickle.Unpickler):
    """``pickle.Unpickler`` that resolves only the dataclasses ``torch.distributed.checkpoint`` writes."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _METADATA_GLOBALS:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"Unsupported global: GLOBAL {module}.{name} was not an allowed global")


def _load_sharded(folder: Path) -> dict[str, Any]:
    meta_path = folder / ".metadata"
    if not meta_path.is_file():
        raise CheckpointError(
            f"{folder} is a folder but not a sharded checkpoint (no .metadata); pass a checkpoint file or folder"
        )
    try:
        with open(meta_path, "rb") as f:
            metadata = _MetadataUnpickler(f).load()
    except pickle.UnpicklingError as e:
        needed = _UNSUPPORTED_GLOBAL.search(str(e))
        if needed:
            raise CheckpointError(
                f"refusing to load {meta_path}: it needs {needed.group(1)}, which is not on the allow-list of "
                "torch.distributed.checkpoint types"
            ) from None
        raise CheckpointError(f"{meta_path} is not readable (truncated?): {_first_line(e)}") from None
    except (EOFError, ValueError, TypeError, AttributeError) as e:
        raise CheckpointError(f"{meta_path} is not readable (truncated?): {_first_line(e)}") from None
    from torch.distributed.checkpoint.metadata import BytesStorageMetadata, Metadata

    if not isinstance(metadata, Metadata):
        raise CheckpointError(f"{meta_path} is not torch.distributed.checkpoint metadata")
    paths = metadata.planner_data if isinstance(metadata.planner_data, dict) else {}
    storage = {index.fqn: info for index, info in (metadata.storage_data or {}).items()}
    flat: dict[tuple[Any, ...], Any] = {}
    tensors = unread = 0
    for fqn, item in metadata.state_dict_metadata.items():
        if not isinstance(item, BytesStorageMetadata):
            tensors += 1
            continue
        info = storage.get(fqn)
        if info is None or getattr(info, "transform_descriptors", None):
            unread += 1  # no location, or stored compressed: not shown
            continue
        with open(folder / info.relative_path, "rb") as f:
            f.seek(info.offset)
            data = f.read(info.length)
        if len(data) != info.length:
            raise CheckpointError(f"{folder / info.relative_path} is truncated: {fqn} is cut short")
        flat[tuple(paths.get(fqn, fqn.split(".")))] = _torch_load(io.BytesIO(data), origin=f"{folder} ({fqn})")
    checkpoint = _nest(flat)
    files = sorted(p.name for p in folder.glob("*.distcp"))
    checkpoint[SHARDED_KEY] = {"tensors": tensors, "unread": unread, "files": files}
    return checkpoint


def _nest(flat: Mapping[tuple[Any, ...], Any]) -> dict[str, Any]:
    root: dict[Any, Any] = {}
    for keys, value in flat.items():
        node = root
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return _listify(root)


def _listify(node: Any) -> Any:
    """Turn the ``{0: a, 1: b}`` dicts that flattening made of lists back into lists."""
    if not isinstance(node, dict):
        return node
    node = {k: _listify(v) for k, v in node.items()}
    if node and all(isinstance(k, int) for k in node) and sorted(node) == list(range(len(node))):
        return [node[i] for i in range(len(node))]
    return node


# -- describing ------------------------------------------------------------------------------------------------------


def describe(checkpoint: Mapping[str, Any], path: str | os.PathLike[str] | None = None) -> str:
    """A few lines saying what ``checkpoint`` holds: run, time, LRs, schedulers, plateau state, versions.

    Args:
        checkpoint (Mapping): What :func:`load_checkpoint_safely` returned.
        path (str | os.PathLike, optional): Where it was loaded from, shown first (symlinks with their target).
    """
    return "\n".join(f"{label:<12} {text}" if label else f"{'':<12} {text}" for label, text in _rows(checkpoint, path))


def _rows(checkpoint: Mapping[str, Any], path: str | os.PathLike[str] | None) -> Iterator[tuple[str, str]]:
    state: Mapping[str, Any] = checkpoint.get("state", {})
    sharded = checkpoint.get(SHARDED_KEY)
    if path is not None:
        p = Path(path)
        where = f"{p} -> {os.readlink(p)}" if p.is_symlink() else str(p)
        if sharded:
            kind = f"sharded, {len(sharded['files'])} .distcp file(s)"
        else:
            kind = f"monolithic, {Path(path).resolve().stat().st_size / 1e6:.1f} MB"
        yield "checkpoint", f"{where} ({kind})"
    yield "run name", str(state.get("run_name", "not stored"))

    timestamp = state.get("timestamp", {}).get("Timestamp")
    if isinstance(timestamp, Mapping):
        text = ", ".join(f"{key} {timestamp.get(key, '?')}" for key in ("epoch", "batch", "token", "sample"))
        wct = timestamp.get("total_wct")
        if isinstance(wct, datetime.timedelta):
            text += f" (training time {wct})"
        yield "timestamp", text
    else:
        yield "timestamp", "not stored"

    metadata = state.get("metadata", {})
    env = metadata.get("composer_env_info", {}) if isinstance(metadata, Mapping) else {}
    versions = [f"composer {env['composer_version']}"] if "composer_version" in env else []
    if "torch_version" in metadata:
        versions.append(f"torch {metadata['torch_version']}")
    foundry_ext = metadata.get("foundry_ext_version") if isinstance(metadata, Mapping) else None
    versions.append(f"foundry-ext {foundry_ext}" if foundry_ext else "foundry-ext not stored")
    yield "versions", ", ".join(versions)
    if isinstance(metadata, Mapping) and "world_size" in metadata:
        yield (
            "saved by",
            (
                f"world size {metadata['world_size']}, device {metadata.get('device', '?')}, "
                f"precision {metadata.get('precision', '?')}"
            ),
        )

    optimizers = state.get("optimizers")
    if isinstance(optimizers, Mapping) and optimizers:
        for name, optimizer in optimizers.items():
            groups = optimizer.get("param_groups") if isinstance(optimizer, Mapping) else None
            if not isinstance(groups, list):
                yield "optimizer", f"{name}: param groups not stored"
                continue
            for i, group in enumerate(groups):
                initial = f" (initial_lr {_num(group['initial_lr'])})" if "initial_lr" in group else ""
                yield ("optimizer" if i == 0 else ""), f"{name} group {i}: lr {_num(group.get('lr'))}{initial}"
    else:
        yield "optimizer", "not stored"

    schedulers = state.get("schedulers")
    if isinstance(schedulers, Mapping) and schedulers:
        for i, (name, sched) in enumerate(schedulers.items()):
            fields = ("last_epoch", "base_lrs", "_last_lr")
            text = ", ".join(f"{f} {_num(sched[f])}" for f in fields if isinstance(sched, Mapping) and f in sched)
            yield ("schedulers" if i == 0 else ""), f"{name}: {text or 'no LambdaLR fields'}"
    else:
        yield "schedulers", "none stored"

    callbacks = state.get("callbacks", {})
    plateau = callbacks.get("ReduceLROnPlateauCallback") if isinstance(callbacks, Mapping) else None
    if isinstance(plateau, Mapping):
        fields = plateau.get("plateau", {})
        yield "plateau", ", ".join(f"{k} {_num(v)}" for k, v in fields.items())
        yield "", f"train-loss window: sum {_num(plateau.get('window_sum'))}, count {plateau.get('window_count')}"
    else:
        yield "plateau", "no ReduceLROnPlateauCallback state (not a reduce_lr_on_plateau run)"
    if isinstance(callbacks, Mapping):
        yield "callbacks", ", ".join(callbacks) or "none"

    if sharded:
        yield (
            "not shown",
            (
                f"{sharded['tensors']} tensors (model weights and optimizer moments) stay in the shards: reading them "
                "needs the model; load with the Trainer instead"
                + (f"; {sharded['unread']} compressed values not read" if sharded["unread"] else "")
            ),
        )


def _num(value: Any) -> str:
    """Floats in full precision (repr), so that values can be compared exactly; lists elementwise."""
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_num(v) for v in value) + "]"
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return repr(value) if isinstance(value, float) else str(value)
