"""Which checkpoint a path names, and what a branch needs from it, read without running code from the file.

A path is a checkpoint file (``ep0-ba8000-rank0.pt``), a ``latest-rank0.pt`` link, a sharded checkpoint folder
(``.metadata`` and ``.distcp`` files, as FSDP's ``state_dict_type: sharded`` writes), or a save folder, whose latest
checkpoint is taken (its ``latest-rank0.pt`` or ``latest-sharded-rank0`` link). The link is resolved here: the branch
loads the file it points at now, not the link, which a live run moves. The values are read by
:func:`foundry_ext.checkpoint.load_checkpoint_safely` (bounded, allow-listed: a hostile file is refused in one line).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundry_ext.anneal.options import AnnealError
from foundry_ext.anneal.ramp import plan_of_checkpoint
from foundry_ext.schedules.batch_size import BatchPlan

__all__ = ["LATEST_LINKS", "Source", "read_source", "resolve_checkpoint"]

#: The names Composer gives the ``latest`` link of rank 0 in a save folder (monolithic, sharded).
LATEST_LINKS = ("latest-rank0.pt", "latest-sharded-rank0")


@dataclass(frozen=True)
class Source:
    """What a branch needs from its checkpoint.

    Attributes:
        path: the resolved checkpoint file or sharded folder (no link left), what the branch's ``load_path`` names.
        folder: the folder it is in: the stable run's save folder (a sharded checkpoint's parent).
        sharded: whether it is a sharded folder (it loads only into a run with FSDP, on a process group).
        batch: ``s``, the batches trained: the branch trains from batch ``s`` (0-indexed).
        lrs: the LR of each param group for batch ``s`` (what the optimizer holds: Composer restores it).
        peaks: each group's ``initial_lr``: the schedule's base LR (multiplier 1).
        optimizer: the optimizer's class name (``DecoupledAdamW``).
        settings: the first param group's hyperparameters (betas, eps, weight_decay, ...), LRs aside.
        samples_per_batch, tokens_per_batch: from the timestamp (``None`` when it has not trained a batch).
        run_name: the stable run's name.
        model_config: the Hugging Face model config stored by llm-foundry (empty when absent).
        schedulers: the schedule that wrote it (``ScheduleResumeCheck``'s record), if stored.
        ramp: the ``batch_size_schedule`` it was trained with (in samples), if any: then ``samples_per_batch`` and
            ``tokens_per_batch`` are ``None`` (the batch grew) and ``samples``, ``tokens`` are the counts trained.
    """

    path: Path
    folder: Path
    sharded: bool
    batch: int
    lrs: list[float]
    peaks: list[float]
    optimizer: str
    settings: dict[str, Any] = field(default_factory=dict)
    samples_per_batch: int | None = None
    tokens_per_batch: int | None = None
    run_name: str | None = None
    model_config: dict[str, Any] = field(default_factory=dict)
    schedulers: list[Any] = field(default_factory=list)
    ramp: BatchPlan | None = None
    samples: int = 0
    tokens: int = 0

    @property
    def multiplier(self) -> float:
        """The schedule's multiplier at batch ``s``: ``lr / initial_lr`` of the first group."""
        return self.lrs[0] / self.peaks[0] if self.peaks[0] else math.nan


def resolve_checkpoint(given: str) -> tuple[Path, bool]:
    """The checkpoint ``given`` names, links resolved, and whether it is a sharded folder.

    Raises:
        AnnealError: missing, or a folder that is neither a sharded checkpoint nor a save folder with a ``latest``.
    """
    path = Path(given)
    if not os.path.lexists(path):
        raise AnnealError(f"CHECKPOINT {given}: no such file or folder")
    if path.is_dir() and not (path / ".metadata").exists():
        links = [path / name for name in LATEST_LINKS if os.path.lexists(path / name)]
        if not links:
            raise AnnealError(
                f"CHECKPOINT {given}: a folder with no {' or '.join(LATEST_LINKS)} link and no .metadata; expected a "
                "checkpoint file, a sharded checkpoint folder, or a save folder with a latest checkpoint"
            )
        path = links[0]
    if os.path.lexists(path) and not os.path.exists(path):
        raise AnnealError(f"CHECKPOINT {given}: {path} is a link to {os.readlink(path)}, which does not exist")
    resolved = path.resolve()
    return resolved, resolved.is_dir()


def read_source(given: str) -> Source:
    """Read the checkpoint ``given`` names (see :func:`resolve_checkpoint`) with the bounded reader.

    Raises:
        AnnealError: not a checkpoint (the reader's one line), or one without the time or the optimizer's LRs.
    """
    path, sharded = resolve_checkpoint(given)
    from foundry_ext.checkpoint import CheckpointError, load_checkpoint_safely  # torch, once the path is sound

    try:
        checkpoint = load_checkpoint_safely(path)
    except CheckpointError as e:
        raise AnnealError(f"CHECKPOINT {given}: {' '.join(str(e).splitlines())}") from None
    except MemoryError:
        raise AnnealError(f"CHECKPOINT {given}: ran out of memory reading it (not a checkpoint anneal reads)") from None
    state = checkpoint["state"]
    try:
        return _source(path, sharded, state)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, ZeroDivisionError) as e:
        raise AnnealError(
            f"CHECKPOINT {given}: not a Composer training checkpoint a branch can start from (its {_what(e)} is "
            "missing or of the wrong type); expected the timestamp and the optimizer's param groups"
        ) from None


def _what(error: BaseException) -> str:
    return f"'{error.args[0]}'" if isinstance(error, KeyError) and error.args else "state"


def _source(path: Path, sharded: bool, state: Mapping[str, Any]) -> Source:
    timestamp = state["timestamp"]["Timestamp"]
    batch = _int(timestamp["batch"])
    optimizers = state["optimizers"]
    if not isinstance(optimizers, Mapping) or len(optimizers) != 1:
        raise TypeError("optimizers")
    name, optimizer = next(iter(optimizers.items()))
    groups = optimizer["param_groups"]
    lrs = [_float(g["lr"]) for g in groups]
    peaks = [_float(g.get("initial_lr", g["lr"])) for g in groups]
    if not lrs:
        raise KeyError("param_groups")
    settings = {
        k: _plain(v) for k, v in groups[0].items() if k not in ("params", "lr", "initial_lr") and isinstance(k, str)
    }
    samples = _int(timestamp.get("sample", 0))
    tokens = _int(timestamp.get("token", 0))
    model_config: dict[str, Any] = {}
    hf = (
        (state.get("integrations") or {}).get("huggingface") if isinstance(state.get("integrations"), Mapping) else None
    )
    if isinstance(hf, Mapping):
        content = ((hf.get("model") or {}).get("config") or {}).get("content")
        if isinstance(content, Mapping):
            model_config = dict(content)
    record = (
        (state.get("callbacks") or {}).get("ScheduleResumeCheck")
        if isinstance(state.get("callbacks"), Mapping)
        else None
    )
    run_name = state.get("run_name")
    ramp = plan_of_checkpoint(state.get("callbacks"))
    return Source(
        path=path,
        folder=path.parent,
        sharded=sharded,
        batch=batch,
        lrs=lrs,
        peaks=peaks,
        optimizer=str(name),
        settings=settings,
        samples_per_batch=samples // batch if batch and samples % batch == 0 and ramp is None else None,
        tokens_per_batch=tokens // batch if batch and tokens % batch == 0 and ramp is None else None,
        run_name=run_name if isinstance(run_name, str) else None,
        model_config=model_config,
        schedulers=list(record.get("schedulers") or []) if isinstance(record, Mapping) else [],
        ramp=ramp,
        samples=samples,
        tokens=tokens,
    )


def _scalar(value: Any) -> Any:
    item = getattr(value, "item", None)  # a one-element tensor or a numpy scalar
    return item() if callable(item) and getattr(value, "ndim", 0) == 0 else value


def _int(value: Any) -> int:
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TypeError("timestamp")
    return int(value)


def _float(value: Any) -> float:
    value = _scalar(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError("lr")
    return float(value)


def _plain(value: Any) -> Any:
    value = _scalar(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value
