"""The Composer callback: decide after the backward pass, before the optimizer step, the same on every rank."""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import torch
from composer.core import Callback, State
from composer.loggers import Logger
from composer.utils import dist

from foundry_ext._command import shown_path
from foundry_ext._exit import exit_run
from foundry_ext.catalog.callbacks import SPIKE_FIELD, SpikeGuardConfig
from foundry_ext.config.base import build
from foundry_ext.config.errors import ConfigError, Problem, stop_run
from foundry_ext.trainer.spike_guard.rollback import continuation, folder_checkpoints, skipped_samples
from foundry_ext.trainer.spike_guard.rule import SpikeRule

__all__ = ["STOP_STATUS", "SpikeGuard"]

log = logging.getLogger(__name__)

#: Exit status of a run the guard stopped (2 is a config error, 1 a crash).
STOP_STATUS = 3


def _refuse(message: str) -> NoReturn:
    """One line on rank 0, exit status 2 on every rank (the same check runs on every rank): :func:`stop_run`."""
    stop_run([Problem("", message)])


def _num_samples(batch: Any) -> int:
    if isinstance(batch, torch.Tensor):
        return int(batch.shape[0])
    if isinstance(batch, Mapping):
        first = batch.get("input_ids", next((v for v in batch.values() if isinstance(v, torch.Tensor)), None))
        return int(first.shape[0]) if first is not None else 1
    if isinstance(batch, (list, tuple)) and batch:
        return _num_samples(batch[0])
    return 1


def _loss_value(loss: Any) -> torch.Tensor:
    """The micro-batch's total loss as Composer sums it (``total`` of a dict, else the sum of the means)."""
    if isinstance(loss, Mapping) and "total" in loss:
        return loss["total"].detach().float().mean()
    if isinstance(loss, Mapping):
        loss = tuple(loss.values())
    parts = loss if isinstance(loss, (list, tuple)) else (loss,)
    return sum(p.detach().float().mean() for p in parts)  # type: ignore[return-value]


class SpikeGuard(Callback):
    r"""Skip a step whose loss (or gradient norm) spikes, on every rank; stop (and roll back) a burst.

    After the last micro-batch's backward pass and before the optimizer step (``Event.AFTER_TRAIN_BATCH``), one
    all-reduce of four scalars (the sample-weighted loss sum, the sample count, the squared gradient norm of whole
    gradients and of shards: :func:`_grad_sq`) gives every rank the batch's loss :math:`x` and the whole model's
    gradient norm :math:`g`, under DDP and FSDP alike; :class:`~.rule.SpikeRule` decides. A skip sets
    every parameter's ``grad`` to ``None``: the optimizer (torch's SGD / Adam / AdamW, Composer's DecoupledSGDW /
    DecoupledAdamW) passes over parameters without a gradient, so the weights and the optimizer state (moments, step
    counts) stay bitwise as they were, while the batch counter and the LR schedule advance. See docs/spike_guard.md.

    Args:
        **kwargs: The keys of :class:`~foundry_ext.catalog.callbacks.SpikeGuardConfig`.
    """

    def __init__(self, **kwargs: Any) -> None:
        try:
            self.config = build(SpikeGuardConfig, kwargs, SPIKE_FIELD)
        except ConfigError as e:
            _refuse(str(e).splitlines()[0])
        c = self.config
        self.rule = SpikeRule(c.threshold, c.window, c.min_history, c.max_skips, c.ceiling)
        self._reset()
        self._stop: str | None = None
        self.skipped_batch: int | None = None  # the last skipped batch (0-indexed): the plateau leaves its loss out
        self.decisions: list[tuple[int, bool, float]] = []  # (batch, skipped, z): read by tests and the benchmark

    def _reset(self) -> None:
        self._loss_sum: torch.Tensor | None = None
        self._count = 0
        self._microbatches = 0
        self._seen = 0
        self._grad_sq: tuple[torch.Tensor, torch.Tensor] | None = None

    # -- checks before the first batch ---------------------------------------------------------------------------

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger  # unused
        guards = [cb for cb in state.callbacks if isinstance(cb, SpikeGuard)]
        if len(guards) > 1:
            _refuse(f"{SPIKE_FIELD}: listed {len(guards)} times; allowed: once (each would skip on its own)")
        if self.config.rollback is not None and self._saver(state) is None:
            _refuse(
                f"{SPIKE_FIELD}.rollback: the run saves no checkpoints (no save_folder); allowed: a rollback with "
                "save_folder set, or no rollback"
            )
        if self.config.rollback is not None and self.config.rollback.save_folder is not None:
            self._check_rollback_folder(state, self.config.rollback.save_folder)

    def _check_rollback_folder(self, state: State, given: str) -> None:
        """Refuse a continuation folder that is the run's own: it would resume from the checkpoints after the burst."""
        import os

        from composer.utils import format_name_with_dist

        def where(folder: str) -> str:
            folder = format_name_with_dist(folder, state.run_name)
            return folder.rstrip("/") if "://" in folder else os.path.realpath(folder)

        own = format_name_with_dist(str(self._saver(state).folder), state.run_name)
        if where(given) == where(own):
            _refuse(
                f"{SPIKE_FIELD}.rollback.save_folder: {given} is the run's own save_folder ({own}): the continuation "
                "would autoresume from this run's checkpoints, written after the burst; allowed: another folder, or "
                "null (the run's own + '-rollback-ba<B>')"
            )

    @staticmethod
    def _saver(state: State) -> Any:
        from composer.callbacks import CheckpointSaver

        return next((cb for cb in state.callbacks if isinstance(cb, CheckpointSaver)), None)

    def after_load(self, state: State, logger: Logger) -> None:
        del logger  # unused
        skip = self.config.skip_data
        if skip is None or state.timestamp.batch.value != skip.at_batch:
            return  # only the load the rollback named: a restart of the continuation from its own checkpoint reads on
        _skip_streaming_batches(state, skip.batches)

    # -- the step --------------------------------------------------------------------------------------------------

    def before_train_batch(self, state: State, logger: Logger) -> None:
        del logger  # unused
        self._reset()
        size = state.device_train_microbatch_size or _num_samples(state.batch)
        self._microbatches = max(1, math.ceil(_num_samples(state.batch) / size))

    def after_loss(self, state: State, logger: Logger) -> None:
        del logger  # unused
        n = _num_samples(state.batch)
        value = _loss_value(state.loss) * n
        self._loss_sum = value if self._loss_sum is None else self._loss_sum + value
        self._count += n

    def after_backward(self, state: State, logger: Logger) -> None:
        del logger  # unused
        self._seen += 1
        if self.config.grad_norm and self._seen == self._microbatches:
            self._grad_sq = _grad_sq(state)  # the last micro-batch: before any clipping (AFTER_TRAIN_BATCH)

    def after_train_batch(self, state: State, logger: Logger) -> None:
        if self._loss_sum is None:
            return
        grad_sq = self._grad_sq
        if self.config.grad_norm and grad_sq is None:
            grad_sq = _grad_sq(state)
        whole, shards = grad_sq if grad_sq is not None else (torch.zeros(()), torch.zeros(()))
        world = dist.get_world_size()
        device = self._loss_sum.device
        # one all-reduce, one host read: every rank decides on the same numbers
        packed = torch.stack(
            [
                self._loss_sum.reshape(()).double(),
                torch.tensor(float(self._count), dtype=torch.float64, device=device),
                whole.double().to(device),
                shards.double().to(device),
            ]
        )
        if world > 1:
            dist.all_reduce(packed, reduce_operation="SUM")
        loss_sum, count, whole_total, shard_total = packed.tolist()
        loss = loss_sum / count
        # every rank holds the whole of a DDP gradient (the same on each: world copies summed) and one shard of an
        # FSDP gradient (the shards summed: the whole model's sum of squares, not one shard's)
        grad_norm = math.sqrt(whole_total / world + shard_total) if self.config.grad_norm else None
        batch = state.timestamp.batch.value
        decision = self.rule.step(loss, grad_norm, batch)
        self.decisions.append((batch, decision.skip, decision.z))
        stop = self.rule.stop_reason(loss)
        if decision.skip or stop:
            _drop_gradients(state)
            self.skipped_batch = batch
        logger.log_metrics(
            {
                "spike_guard/skipped": int(decision.skip or stop is not None),
                "spike_guard/skips": self.rule.skips,
                "spike_guard/z": decision.z,
                **({"spike_guard/grad_norm": grad_norm} if grad_norm is not None else {}),
            }
        )
        if decision.skip and dist.get_global_rank() == 0:
            norm = f", grad norm {grad_norm:.6g} (z {decision.grad_z:.3g})" if grad_norm is not None else ""
            print(
                f"spike_guard: skipped batch {batch + 1}: loss {loss:.6g} (z {decision.z:.3g}){norm}, "
                f"reason {decision.reason}; {self.rule.consecutive} in a row, {self.rule.skips} in the run",
                flush=True,
            )
        if stop is not None:
            self._stop = stop

    def batch_end(self, state: State, logger: Logger) -> None:
        del logger  # unused
        if self._stop is None:
            return
        reason, self._stop = self._stop, None
        batch = state.timestamp.batch.value  # batches done; the last one read is batch - 1 (0-indexed)
        message = f"spike_guard: stopped at batch {batch}: {reason}"
        if self.config.rollback is not None:
            message += "; " + self._roll_back(state, batch - 1)
        if dist.get_global_rank() == 0:
            print(message, file=sys.stderr, flush=True)
        dist.barrier()
        exit_run(STOP_STATUS)  # SystemExit, and on a launched rank no finalisation beside gloo's threads (_exit)

    def _roll_back(self, state: State, last_batch: int) -> str:
        from composer.utils import format_name_with_dist

        rollback = self.config.rollback
        assert rollback is not None
        saver = self._saver(state)
        folder = Path(format_name_with_dist(str(saver.folder), state.run_name))
        checkpoints = folder_checkpoints(folder)
        for path, stamp in getattr(saver, "all_saved_checkpoints_to_timestamp", {}).items():
            saved = Path(path)
            if saved.suffix == ".distcp":  # sharded: the saver names this rank's file, load_path names the folder
                saved = saved.parent
            checkpoints.setdefault(str(saved.resolve()), int(stamp.batch.value))
        first = self.rule.first_skip_batch if self.rule.first_skip_batch is not None else last_batch
        plan = continuation(
            checkpoints, first, last_batch, rollback.skip_batches, str(folder), state.run_name, rollback.save_folder
        )
        if plan is None:
            return f"no checkpoint in {folder} before batch {first + 1} (the first skip): nothing to roll back to"
        target = folder.parent / f"spike_guard-rollback-ba{plan.at_batch}.yaml"
        if dist.get_global_rank() == 0:
            plan.write(target, f"stopped at batch {last_batch + 1}; first skip at batch {first + 1}")
        return (
            f"rollback written to {shown_path(str(target))}: from {shown_path(plan.load_path)} (batch "
            f"{plan.at_batch}), skipping {plan.skip} data batches ({_samples_of(state, plan.at_batch, plan.skip)} "
            f"samples), into {shown_path(plan.save_folder)}; run: {plan.command()}"
        )

    # -- resume ---------------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {"rule": self.rule.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rule.load_state_dict(state["rule"])


def _params(state: State) -> list[torch.nn.Parameter]:
    params = [p for opt in state.optimizers for group in opt.param_groups for p in group["params"]]
    return params or list(state.model.parameters())


def _grad_sq(state: State) -> tuple[torch.Tensor, torch.Tensor]:
    r"""This rank's part of the squared gradient norm: ``(whole, shards)``, plain tensors summed over the ranks after.

    ``whole`` sums the squares of the gradients this rank holds entirely (DDP, one process: every rank the same);
    ``shards`` those of the pieces of sharded gradients, so that over the :math:`W` ranks
    :math:`\|g\|^2 = \sum_r whole_r / W + \sum_r shards_r`. FSDP2 (``fully_shard``) makes each gradient a DTensor
    sharded on dim 0: its local shard counts, divided by the ranks holding the same shard (HSDP's replicas; 1 under
    plain FSDP2). FSDP1 (``use_orig_params``) gives each parameter a plain gradient that is this rank's shard.
    """
    from torch.distributed.tensor import DTensor

    whole: list[torch.Tensor] = []
    shards: list[torch.Tensor] = []
    fsdp1 = getattr(state, "fsdp_config_version", 0) == 1
    for p in _params(state):
        if p.grad is None:
            continue
        g = p.grad.detach()
        if isinstance(g, DTensor):
            replicas = math.prod(g.device_mesh.size(i) for i, pl in enumerate(g.placements) if pl.is_replicate())
            shards.append(g.to_local().float().pow(2).sum() / replicas)
        else:
            (shards if fsdp1 else whole).append(g.float().pow(2).sum())
    return _total(whole), _total(shards)


def _total(parts: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack(parts).sum() if parts else torch.zeros(())


def _drop_gradients(state: State) -> None:
    """No gradient, no update: a multiply by 0 would not be bitwise (inf * 0 = nan), and would still step Adam."""
    for p in _params(state):
        p.grad = None
    for p in state.model.parameters():
        p.grad = None


def _skip_streaming_batches(state: State, batches: int) -> None:
    """Advance a StreamingDataset's resume point (loaded from the checkpoint) by ``batches`` global batches.

    Counted in samples (:func:`~.rollback.skipped_samples`): with a batch-size ramp each batch is its stage's size,
    from the checkpoint's sample count on, as the stopped run read them.
    """
    loader = state.train_dataloader
    dataset = getattr(loader, "dataset", None)
    if dataset is None or not hasattr(dataset, "_shm_prefix_int"):
        _refuse(
            f"{SPIKE_FIELD}.skip_data: the train dataset is {type(dataset).__name__}, not a StreamingDataset; allowed: "
            "skip_data with a streaming (MDS) train loader such as llm-foundry's text loader"
        )
    from streaming.base.constant import RESUME
    from streaming.base.shared import SharedMemory, _get_path

    # streaming 0.13: load_state_dict stores the resume point as JSON in shared memory (re-loading it is supported)
    shm = SharedMemory(name=_get_path(dataset._shm_prefix_int, RESUME), create=False)
    raw = bytes(shm.buf)
    obj = json.loads(raw[: raw.find(b"\0")] if b"\0" in raw else raw)
    samples = skipped_samples(batches, int(state.timestamp.sample), _global_batch(state))
    obj["sample_in_epoch"] = int(obj["sample_in_epoch"]) + samples
    dataset.load_state_dict(obj)
    if dist.get_global_rank() == 0:
        print(
            f"spike_guard: skipping {batches} data batches ({samples} samples) after batch "
            f"{state.timestamp.batch.value}, as the rollback named",
            flush=True,
        )


def _samples_of(state: State, at_batch: int, batches: int) -> int:
    """The samples of this run's data batches ``at_batch .. at_batch + batches - 1``: each its ramp stage's size.

    The continuation skips the same samples, from the checkpoint's sample count (:func:`_skip_streaming_batches`).
    """
    size_at = _global_batch(state)
    return skipped_samples(batches, skipped_samples(at_batch, 0, size_at), size_at)


def _global_batch(state: State) -> Callable[[int], int]:
    """The global batch of a batch that starts after ``s`` samples: its ramp stage's, else the loader's x the ranks."""
    per_batch = int(state.train_dataloader.batch_size) * dist.get_world_size()  # type: ignore[union-attr]
    plan = _ramp_plan(state, per_batch)  # a ramp's loader reads the first stage's batch
    return (lambda s: per_batch) if plan is None else plan.size_at


def _ramp_plan(state: State, base: int) -> Any:
    """The run's batch-size ramp (a ``BatchPlan``), or None without one.

    At ``AFTER_LOAD`` the ramp's callback has not bound its plan yet (``FIT_START`` does): built as it builds it.
    """
    from foundry_ext.schedules.batch_size import plan_of
    from foundry_ext.trainer.batch_size import BatchSizeScheduleCallback

    ramp = next((cb for cb in state.callbacks if isinstance(cb, BatchSizeScheduleCallback)), None)
    if ramp is None:
        return None
    if ramp.plan is not None:
        return ramp.plan
    seq_len = getattr(state.train_dataloader.dataset, "max_seq_len", None)  # type: ignore[union-attr]
    plan, _ = plan_of(ramp.schedule, base, seq_len)  # a bad ramp: its callback stops the run at FIT_START
    return plan
