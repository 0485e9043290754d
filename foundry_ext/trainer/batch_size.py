"""Batch-size warmup inside Composer's Trainer: the ``text_batch_ramp`` loader and the ``batch_size_schedule`` callback.

The schedule (:mod:`foundry_ext.schedules.batch_size`) is a pure function of the samples trained, and Composer's
timestamp counts them exactly and saves them in every checkpoint; both pieces read it there, so a resumed run trains
the batches and LRs of the uninterrupted one:

* :class:`RampDataLoader` (``train_loader.name: text_batch_ramp``, llm-foundry's ``text`` loader otherwise): its
  ``DataLoader`` yields the first stage's per-rank batch ``b_0`` (``global_train_batch_size / ranks``), and each
  batch the Trainer receives is ``m`` of those concatenated, ``m = B / B_0`` for the stage at
  ``state.timestamp.sample`` when the batch is fetched (after the previous batch's end). mosaicml-streaming lays the
  samples of an epoch out in per-rank runs of ``batch_size = b_0`` (its partition), so ``m`` of them on every rank
  are exactly the next ``m * B_0`` samples of the global order: after ``S`` samples (a multiple of ``B_0``) every
  rank has read its share of the first ``S``, and ``StreamingDataset.state_dict(S)`` resumes at sample ``S``.
* :class:`BatchSizeScheduleCallback`: binds the loader to the state, and wraps every ``LambdaLR`` lambda so that the
  LR set at the end of batch ``b`` (for batch ``b + 1``) is the schedule's value times the factor of the stage batch
  ``b + 1`` trains in (:meth:`~foundry_ext.schedules.batch_size.BatchPlan.next_factor`). The wrapped lambdas are
  plain functions, so ``LambdaLR.state_dict`` (and a checkpoint) holds what it held without the ramp.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from composer.core import Callback, State
from composer.loggers import Logger
from composer.utils import dist
from torch.utils.data import DataLoader

from foundry_ext.config.base import build
from foundry_ext.config.errors import Problem, stop_run
from foundry_ext.schedules.batch_size import BatchPlan, BatchSizeSchedule, plan_of

__all__ = ["BatchSizeScheduleCallback", "RampDataLoader", "build_text_batch_ramp_dataloader"]

_PATH = "callbacks.batch_size_schedule"


class RampDataLoader(DataLoader):
    """A ``DataLoader`` of per-rank base batches whose iterator yields whole groups of them, one group per stage batch.

    It has no length in batches (``len()`` raises ``TypeError``, so Composer's ``state.dataloader_len`` is None):
    how many batches an epoch holds depends on where in the ramp it starts.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ramp_state: State | None = None
        self.ramp_plan: BatchPlan | None = None

    def __len__(self) -> int:
        raise TypeError("a text_batch_ramp loader has no length in batches: its batch grows with the samples trained")

    def group(self) -> int:
        """How many base batches the next batch is: the stage's global batch over the first stage's."""
        if self.ramp_state is None or self.ramp_plan is None:
            raise RuntimeError("train_loader text_batch_ramp needs callbacks.batch_size_schedule (not bound)")
        sample = int(self.ramp_state.timestamp.sample)
        return self.ramp_plan.size_at(sample) // self.ramp_plan.base

    def __iter__(self) -> Iterator[Any]:
        base = super().__iter__()
        while True:
            parts = []
            for _ in range(self.group()):
                try:
                    parts.append(next(base))
                except StopIteration:  # the epoch's data ends inside a group: dropped, as drop_last drops a batch
                    return
            yield parts[0] if len(parts) == 1 else concat(parts)


def concat(parts: list[Any]) -> Any:
    """Batches joined along the sample dimension: tensors, per-sample lists, and mappings of them."""
    first = parts[0]
    if isinstance(first, torch.Tensor):
        if any(p.shape[1:] != first.shape[1:] for p in parts):
            shapes = ", ".join(str(tuple(p.shape)) for p in parts)
            raise RuntimeError(
                f"text_batch_ramp: base batches of shapes {shapes} cannot be joined; the ramp needs every sequence "
                "padded to max_seq_len (pre-tokenised, concatenated MDS data)"
            )
        return torch.cat(parts)
    if isinstance(first, Mapping):
        return {k: concat([p[k] for p in parts]) for k in first}
    if isinstance(first, list):  # per-sample values (llm-foundry's total_tokens, loss_generating_tokens)
        return [item for part in parts for item in part]
    raise TypeError(f"text_batch_ramp: cannot join batch items of type {type(first).__name__}")


def build_text_batch_ramp_dataloader(tokenizer: Any, device_batch_size: int | float, **kwargs: Any) -> Any:
    """llm-foundry's ``text`` loader (the same keys); its ``DataLoader`` a :class:`RampDataLoader`, same settings."""
    from llmfoundry.data.text_data import build_text_dataloader

    spec = build_text_dataloader(tokenizer=tokenizer, device_batch_size=device_batch_size, **kwargs)
    dl = spec.dataloader
    spec.dataloader = RampDataLoader(
        dl.dataset,
        collate_fn=dl.collate_fn,
        batch_size=dl.batch_size,
        drop_last=dl.drop_last,
        num_workers=dl.num_workers,
        pin_memory=dl.pin_memory,
        prefetch_factor=dl.prefetch_factor,
        persistent_workers=dl.persistent_workers,
        timeout=dl.timeout,
    )
    return spec


def _scaled(fn: Callable[[int], float], plan: BatchPlan, state: State) -> Callable[[int], float]:
    def lr_lambda(epoch: int) -> float:
        # called by LambdaLR.step() at the end of batch b, before the timestamp advances: the LR it sets is batch
        # b + 1's, whose stage follows from the samples before batch b plus batch b's own
        return fn(epoch) * plan.next_factor(int(state.timestamp.sample))

    lr_lambda.batch_ramp_inner = fn  # type: ignore[attr-defined]  # marks it wrapped; the schedule's own lambda
    return lr_lambda


class BatchSizeScheduleCallback(Callback):
    """``callbacks.batch_size_schedule``: the keys of :class:`~foundry_ext.schedules.batch_size.BatchSizeSchedule`.

    Written there by the config transform from the top-level ``batch_size_schedule`` (or by hand, with
    ``train_loader.name: text``). Its checkpoint state is the plan in samples; a resume under another plan or another
    number of ranks is refused in one line before the first batch.
    """

    def __init__(self, **kwargs: Any) -> None:
        self.schedule = build(BatchSizeSchedule, kwargs, _PATH)
        self.plan: BatchPlan | None = None
        self._loaded: dict[str, Any] | None = None

    def fit_start(self, state: State, logger: Logger) -> None:
        loader = state.train_dataloader
        if not isinstance(loader, RampDataLoader):
            stop_run([Problem("train_loader.name", "callbacks.batch_size_schedule needs train_loader.name: text "
                                                   "(the config transform makes it text_batch_ramp)")])  # fmt: skip
        world = dist.get_world_size()
        base = int(loader.batch_size) * world
        seq_len = getattr(loader.dataset, "max_seq_len", None)
        plan, problems = plan_of(self.schedule, base, seq_len, _PATH)
        if problems:
            stop_run(problems)
        assert plan is not None
        if self._loaded is not None:
            self._compare(plan, world)
        self.plan = plan
        loader.ramp_state, loader.ramp_plan = state, plan
        self._wrap(state)

    def after_train_batch(self, state: State, logger: Logger) -> None:
        # before this batch's scheduler.step(): lambdas another callback installed since (the plateau's) get the factor
        self._wrap(state)

    def batch_start(self, state: State, logger: Logger) -> None:
        assert self.plan is not None
        sample = int(state.timestamp.sample)  # before this batch: its stage
        logger.log_metrics(
            {"batch_size/global": self.plan.size_at(sample), "batch_size/stage": self.plan.stage_at(sample)}
        )

    def _wrap(self, state: State) -> None:
        assert self.plan is not None
        for lambda_lr in state.schedulers:
            lambdas = getattr(lambda_lr, "lr_lambdas", None)
            if lambdas and not all(hasattr(fn, "batch_ramp_inner") for fn in lambdas):
                lambda_lr.lr_lambdas = [
                    fn if hasattr(fn, "batch_ramp_inner") else _scaled(fn, self.plan, state) for fn in lambdas
                ]

    def _compare(self, plan: BatchPlan, world: int) -> None:
        saved = self._loaded or {}
        now = {"starts": list(plan.starts), "sizes": list(plan.sizes), "lr_scaling": plan.lr_scaling}
        was = {k: saved.get(k) for k in now}
        if was != now:
            stop_run([Problem(_PATH, f"the checkpoint was trained with the ramp {was} (in samples), this config asks "
                                     f"for {now}; allowed: the checkpoint's ramp")])  # fmt: skip
        if saved.get("world_size") != world:
            stop_run([Problem(_PATH, f"the checkpoint was trained on {saved.get('world_size')} ranks, this run has "
                                     f"{world}: resuming a batch-size ramp on another number of ranks is not "
                                     "supported; relaunch on the checkpoint's")])  # fmt: skip

    def state_dict(self) -> dict[str, Any]:
        if self.plan is None:
            return {}
        return {
            "starts": list(self.plan.starts),
            "sizes": list(self.plan.sizes),
            "lr_scaling": self.plan.lr_scaling,
            "world_size": dist.get_world_size(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._loaded = dict(state) if state else None
