"""The rows ``foundry-ext inspect`` prints (:func:`describe`): run, time, LRs, schedulers, plateau state, versions.

:func:`describe` never fails on a loaded checkpoint: a field of unexpected type is shown in its row as
``state.timestamp: expected a mapping, got int 5`` and the other rows are still shown.
"""

from __future__ import annotations

import datetime
import math
import os
from collections.abc import Callable, Iterator, Mapping
from itertools import islice
from pathlib import Path
from typing import Any

import numpy as np
import torch

from foundry_ext.checkpoint.errors import brief_key
from foundry_ext.checkpoint.sharded import SHARDED_KEY
from foundry_ext.text import one_line

__all__ = ["describe"]

_MAX_ITEMS = 64  # param groups, schedulers, callbacks, list elements shown; the rest is counted


class _Unexpected(Exception):
    """A field of the checkpoint has a type ``describe`` does not expect; shown in its row, with its path."""

    def __init__(self, where: str, expected: str, value: Any) -> None:
        super().__init__(f"{where}: expected {expected}, got {_brief(value)}")


def describe(checkpoint: Mapping[str, Any], path: str | os.PathLike[str] | None = None) -> str:
    """A few lines saying what ``checkpoint`` holds: run, time, LRs, schedulers, plateau state, versions.

    Never raises on a mapping: a field of unexpected type is shown in its row with its path in the checkpoint and what
    was found (``state.timestamp: expected a mapping, got int 5``); the other rows are still shown.

    Args:
        checkpoint (Mapping): What :func:`~foundry_ext.checkpoint.reader.load_checkpoint_safely` returned.
        path (str | os.PathLike, optional): Where it was loaded from, shown first (symlinks with their target).
    """
    return "\n".join(f"{label:<12} {text}" if label else f"{'':<12} {text}" for label, text in _rows(checkpoint, path))


def _rows(checkpoint: Mapping[str, Any], path: str | os.PathLike[str] | None) -> Iterator[tuple[str, str]]:
    state = checkpoint.get("state", {})
    sharded = checkpoint.get(SHARDED_KEY)
    if path is not None:
        yield "checkpoint", _where(Path(path), sharded)
    if not isinstance(state, Mapping):
        yield "state", str(_Unexpected("state", "a mapping", state))
        return
    for label, build in (
        ("run name", lambda: _run_name(state)),
        ("timestamp", lambda: _timestamp(state)),
        ("versions", lambda: _versions(state)),
        ("saved by", lambda: _saved_by(state)),
        ("optimizer", lambda: _optimizers(state)),
        ("schedulers", lambda: _schedulers(state)),
        ("plateau", lambda: _plateau(state)),
        ("batch size", lambda: _batch_ramp(state)),
        ("callbacks", lambda: _callbacks(state)),
        ("not shown", lambda: _not_shown(sharded)),
    ):
        yield from _guarded(label, build)


def _guarded(label: str, build: Callable[[], Iterator[tuple[str, str]]]) -> Iterator[tuple[str, str]]:
    """The rows ``build`` makes; where it meets an unexpected field, a row that says so instead of the rest."""
    try:
        for row in build():
            yield row
            label = ""  # a failure after the first row continues the same block
    except _Unexpected as e:
        yield label, str(e)


def _where(path: Path, sharded: Any) -> str:
    try:
        where = f"{one_line(path)} -> {one_line(os.readlink(path))}" if path.is_symlink() else one_line(path)
    except OSError:  # replaced since it was loaded
        where = one_line(path)
    if isinstance(sharded, Mapping):
        files = sharded.get("files")
        return f"{where} (sharded, {len(files) if isinstance(files, list) else '?'} .distcp file(s))"
    try:
        return f"{where} (monolithic, {os.stat(path).st_size / 1e6:.1f} MB)"
    except OSError:
        return f"{where} (monolithic)"


def _run_name(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    name = state.get("run_name")
    yield "run name", "not stored" if name is None else _text(name, "state.run_name")


def _timestamp(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    outer = state.get("timestamp")
    timestamp = None if outer is None else _mapping(outer, "state.timestamp").get("Timestamp")
    if timestamp is None:
        yield "timestamp", "not stored"
        return
    where = "state.timestamp.Timestamp"
    timestamp = _mapping(timestamp, where)
    text = ", ".join(
        f"{key} {'?' if timestamp.get(key) is None else _integer(timestamp[key], f'{where}.{key}')}"
        for key in ("epoch", "batch", "token", "sample")
    )
    wct = timestamp.get("total_wct")
    if wct is not None:
        if not isinstance(wct, datetime.timedelta):
            raise _Unexpected(f"{where}.total_wct", "a timedelta", wct)
        text += f" (training time {wct})"
    yield "timestamp", text


def _metadata(state: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata = state.get("metadata")
    return {} if metadata is None else _mapping(metadata, "state.metadata")


def _versions(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    metadata = _metadata(state)
    env = metadata.get("composer_env_info")
    env = {} if env is None else _mapping(env, "state.metadata.composer_env_info")
    versions = []
    if env.get("composer_version") is not None:
        where = "state.metadata.composer_env_info.composer_version"
        versions.append(f"composer {_text(env['composer_version'], where)}")
    if metadata.get("torch_version") is not None:
        versions.append(f"torch {_text(metadata['torch_version'], 'state.metadata.torch_version')}")
    foundry_ext = metadata.get("foundry_ext_version")
    if foundry_ext is None or (isinstance(foundry_ext, str) and not foundry_ext):
        versions.append("foundry-ext not stored")
    else:
        versions.append(f"foundry-ext {_text(foundry_ext, 'state.metadata.foundry_ext_version')}")
    yield "versions", ", ".join(versions)


def _saved_by(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    metadata = _metadata(state)
    if "world_size" not in metadata:
        return
    world_size = _integer(metadata["world_size"], "state.metadata.world_size")
    device, precision = (
        "?" if metadata.get(key) is None else _text(metadata[key], f"state.metadata.{key}")
        for key in ("device", "precision")
    )
    yield "saved by", f"world size {world_size}, device {device}, precision {precision}"


def _optimizers(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    optimizers = state.get("optimizers")
    if optimizers is None or (isinstance(optimizers, Mapping) and not optimizers):
        yield "optimizer", "not stored"
        return
    for name, where, optimizer in _items(_mapping(optimizers, "state.optimizers"), "state.optimizers"):
        yield from _guarded("optimizer", lambda n=name, w=where, o=optimizer: _param_groups(n, w, o))


def _param_groups(name: str, where: str, optimizer: Any) -> Iterator[tuple[str, str]]:
    groups = _mapping(optimizer, where).get("param_groups")
    if groups is None:
        yield "optimizer", f"{name}: param groups not stored"
        return
    if not isinstance(groups, (list, tuple)):
        raise _Unexpected(f"{where}.param_groups", "a list", groups)
    for i, group in enumerate(groups[:_MAX_ITEMS]):
        label = "optimizer" if i == 0 else ""
        yield from _guarded(
            label, lambda lb=label, i=i, g=group: _param_group(lb, name, i, g, f"{where}.param_groups[{i}]")
        )
    if len(groups) > _MAX_ITEMS:
        yield "", f"{name}: {len(groups) - _MAX_ITEMS} more param groups not shown"


def _param_group(label: str, name: str, i: int, group: Any, where: str) -> Iterator[tuple[str, str]]:
    group = _mapping(group, where)
    lr = "None" if group.get("lr") is None else _number(group["lr"], f"{where}.lr")
    initial = f" (initial_lr {_number(group['initial_lr'], f'{where}.initial_lr')})" if "initial_lr" in group else ""
    yield label, f"{name} group {i}: lr {lr}{initial}"


def _schedulers(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    schedulers = state.get("schedulers")
    if schedulers is None or (isinstance(schedulers, Mapping) and not schedulers):
        yield "schedulers", "none stored"
        return
    items = _items(_mapping(schedulers, "state.schedulers"), "state.schedulers")
    for i, (name, where, sched) in enumerate(items):
        label = "schedulers" if i == 0 else ""
        yield from _guarded(label, lambda lb=label, n=name, w=where, s=sched: _scheduler(lb, n, w, s))


def _scheduler(label: str, name: str, where: str, sched: Any) -> Iterator[tuple[str, str]]:
    sched = _mapping(sched, where)
    fields: dict[str, Callable[[Any, str], str]] = {"last_epoch": _integer, "base_lrs": _numbers, "_last_lr": _numbers}
    text = ", ".join(f"{f} {render(sched[f], f'{where}.{f}')}" for f, render in fields.items() if f in sched)
    yield label, f"{name}: {text or 'no LambdaLR fields'}"


def _plateau(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    callbacks = state.get("callbacks")
    plateau = callbacks.get("ReduceLROnPlateauCallback") if isinstance(callbacks, Mapping) else None
    if plateau is None:
        yield "plateau", "no ReduceLROnPlateauCallback state (not a reduce_lr_on_plateau run)"
        return
    where = "state.callbacks.ReduceLROnPlateauCallback"
    plateau = _mapping(plateau, where)
    fields = plateau.get("plateau")
    fields = {} if fields is None else _mapping(fields, f"{where}.plateau")
    yield (
        "plateau",
        ", ".join(
            f"{_key(k)} {'None' if v is None else _number(v, _path(f'{where}.plateau', k))}"
            for k, v in islice(fields.items(), _MAX_ITEMS)
        ),
    )
    window_sum, window_count = plateau.get("window_sum"), plateau.get("window_count")
    total = "None" if window_sum is None else _number(window_sum, f"{where}.window_sum")
    count = "None" if window_count is None else _integer(window_count, f"{where}.window_count")
    yield "", f"train-loss window: sum {total}, count {count}"


def _batch_ramp(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """A ``batch_size_schedule`` run's stage at the checkpoint: the next batch's global batch (none without a ramp)."""
    callbacks = state.get("callbacks")
    ramp = callbacks.get("BatchSizeScheduleCallback") if isinstance(callbacks, Mapping) else None
    if not ramp:  # another run, or a ramp whose callback saved before its first fit: no row
        return
    where = "state.callbacks.BatchSizeScheduleCallback"
    ramp = _mapping(ramp, where)
    starts = [int(_integer(v, f"{where}.starts[{i}]")) for i, v in enumerate(ramp.get("starts") or [])]
    sizes = [int(_integer(v, f"{where}.sizes[{i}]")) for i, v in enumerate(ramp.get("sizes") or [])]
    if not starts or len(starts) != len(sizes):
        raise _Unexpected(where, "starts and sizes of one length", ramp)
    timestamp = _mapping(_mapping(state.get("timestamp") or {}, "state.timestamp").get("Timestamp") or {}, where)
    sample = int(_integer(timestamp.get("sample", 0), "state.timestamp.Timestamp.sample"))
    stage = max(i for i, start in enumerate(starts) if sample >= start)
    rule = _text(ramp.get("lr_scaling", "?"), f"{where}.lr_scaling")
    ratio = sizes[stage] / sizes[0]
    factor = {"none": 1.0, "sqrt": math.sqrt(ratio), "linear": ratio}.get(rule)
    shown = "?" if factor is None else f"{factor:.6g}"
    text = f"stage {stage} of 0-{len(sizes) - 1}: the next batch, from sample {sample}, is {sizes[stage]} samples"
    yield "batch size", f"{text}, LR x {shown} (lr_scaling {rule})"
    ramp_text = ", ".join(f"{size} from sample {start}" for start, size in zip(starts, sizes, strict=True))
    yield "", f"ramp: {ramp_text}; saved on {_integer(ramp.get('world_size', 0), f'{where}.world_size')} rank(s)"


def _callbacks(state: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    callbacks = state.get("callbacks")
    if callbacks is None:
        return
    callbacks = _mapping(callbacks, "state.callbacks")
    names = ", ".join(_key(name) for name in islice(callbacks, _MAX_ITEMS))
    more = f" and {len(callbacks) - _MAX_ITEMS} more" if len(callbacks) > _MAX_ITEMS else ""
    yield "callbacks", (names + more) or "none"


def _not_shown(sharded: Any) -> Iterator[tuple[str, str]]:
    if sharded is None:
        return
    sharded = _mapping(sharded, SHARDED_KEY)
    tensors = _integer(sharded.get("tensors"), f"{SHARDED_KEY}.tensors")
    unread = int(_integer(sharded.get("unread", 0), f"{SHARDED_KEY}.unread"))
    yield (
        "not shown",
        f"{tensors} tensors (model weights and optimizer moments) stay in the shards: reading them needs the model; "
        "load with the Trainer instead" + (f"; {unread} compressed values not read" if unread else ""),
    )


# -- typed access: each returns the text to show or raises _Unexpected with the field's path ---------------------------


def _items(mapping: Mapping[Any, Any], where: str) -> Iterator[tuple[str, str, Any]]:
    """``(shown key, path of the value, value)`` for the first :data:`_MAX_ITEMS` entries."""
    for key, value in islice(mapping.items(), _MAX_ITEMS):
        yield _key(key), _path(where, key), value


def _path(where: str, key: Any) -> str:
    if isinstance(key, str) and key and key.isprintable() and not any(c in key for c in ".[] "):
        return f"{where}.{key}"
    return f"{where}[{brief_key(key)}]"


def _key(key: Any) -> str:
    return one_line(key[:200]) if isinstance(key, str) else brief_key(key)


def _mapping(value: Any, where: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise _Unexpected(where, "a mapping", value)
    return value


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):  # TorchVersion is a str
        raise _Unexpected(where, "a string", value)
    if not value.strip():  # quoted: a blank value would read as a row with nothing in it
        return one_line(repr(value[:200]))
    return one_line(value[:200]) + (f"... ({len(value)} characters)" if len(value) > 200 else "")


def _scalar(value: Any) -> Any:
    """A one-element tensor's Python value (so that a tensor LR is shown as a number); anything else unchanged."""
    if not isinstance(value, torch.Tensor):
        return value
    try:  # sparse, quantized or nested tensors may refuse: they are then shown as unexpected
        return value.item() if value.numel() == 1 else value
    except (RuntimeError, ValueError, TypeError):
        return value


def _integer(value: Any, where: str) -> str:
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise _Unexpected(where, "an integer", value)
    return str(int(value))


def _number(value: Any, where: str) -> str:
    """Floats in full precision (repr), so that values can be compared exactly."""
    value = _scalar(value)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise _Unexpected(where, "a number", value)
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    value = float(value)
    return str(value) if not math.isfinite(value) else repr(value)


def _numbers(value: Any, where: str) -> str:
    if not isinstance(value, (list, tuple)):
        raise _Unexpected(where, "a list of numbers", value)
    shown = [_number(v, f"{where}[{i}]") for i, v in enumerate(value[:_MAX_ITEMS])]
    if len(value) > _MAX_ITEMS:
        shown.append(f"... {len(value) - _MAX_ITEMS} more")
    return "[" + ", ".join(shown) + "]"


def _brief(value: Any) -> str:
    """What a value is, in a few words: ``int 5``, ``str 'abc'``, ``list of 3 items``, ``Tensor of shape (2, 3)``."""
    kind = type(value).__name__
    if value is None:
        return "None"
    if isinstance(value, (bool, int, float, np.generic)):
        return f"{kind} {one_line(repr(value)[:60])}"
    if isinstance(value, str):
        return f"{kind} {one_line(repr(value[:60]))}{'...' if len(value) > 60 else ''}"
    if isinstance(value, (bytes, bytearray)):
        return f"{kind} of length {len(value)}"
    if isinstance(value, Mapping):
        return f"{kind} with {len(value)} key{'s' * (len(value) != 1)}"
    if isinstance(value, (list, tuple, set, frozenset)):
        return f"{kind} of {len(value)} item{'s' * (len(value) != 1)}"
    if isinstance(value, (torch.Tensor, np.ndarray)):
        try:
            return f"{kind} of shape {tuple(value.shape)}, dtype {value.dtype}"
        except (RuntimeError, ValueError, TypeError):  # a nested tensor has no single shape
            return kind
    if isinstance(value, datetime.timedelta):
        return f"timedelta {value}"
    return kind
