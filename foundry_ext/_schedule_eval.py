"""Evaluate a Composer scheduler over a run without a Trainer: one real ``State`` whose timestamp is moved.

A scheduler is a function of ``state.timestamp`` (and ``max_duration``/``dataloader_len``), so a minimal real
:class:`~composer.core.State` with a one-parameter model is all it needs. The Trainer calls the scheduler at the
end of each batch with the timestamp already advanced, so the LR used by 0-indexed batch ``b`` is the multiplier
evaluated at ``timestamp.batch == b``; that is what :meth:`ScheduleEvaluator.at` returns.

Used by ``foundry-ext plot`` and ``foundry-ext validate``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from composer.core import State, Time, Timestamp, TimeUnit
from composer.devices import DeviceCPU

from foundry_ext._time import convert
from foundry_ext.plateau.rule import Cut, PlateauState

__all__ = [
    "Clock",
    "PlateauCut",
    "ScheduleEvaluator",
    "boundaries",
    "sample_batches",
    "simulate_plateau",
    "units_used",
]


@dataclass(frozen=True)
class Clock:
    """How one batch maps to samples, tokens and epochs (``None``: unknown, counted as 0)."""

    samples_per_batch: int | None = None
    tokens_per_batch: int | None = None
    batches_per_epoch: int | None = None

    def batches(self, time: Time) -> int:
        """The first batch at which ``time`` (in ba, ep, sp or tok) has been reached: ``ceil``, as the Trainer stops."""
        value = time.value
        if time.unit == TimeUnit.BATCH:
            return int(value)
        per = {
            TimeUnit.EPOCH: self.batches_per_epoch,
            TimeUnit.SAMPLE: self.samples_per_batch,
            TimeUnit.TOKEN: self.tokens_per_batch,
        }.get(time.unit)
        if not per:
            raise ValueError(
                f"cannot convert {value}{time.unit.value} to batches: the batch size in that unit is unknown"
            )
        if time.unit == TimeUnit.EPOCH:
            return int(value * per)
        return math.ceil(value / per)


def units_used(value: Any) -> set[str]:
    """Units of every Composer time string or :class:`Time` inside ``value`` (nested dicts and lists)."""
    if isinstance(value, Time):
        return {value.unit.value}
    if isinstance(value, str):
        try:
            return {Time.from_timestring(value.strip()).unit.value}
        except (ValueError, KeyError, IndexError):
            return set()
    if isinstance(value, Mapping):
        return set().union(*(units_used(v) for v in value.values())) if value else set()
    if isinstance(value, (list, tuple)):
        return set().union(*(units_used(v) for v in value)) if value else set()
    return set()


class ScheduleEvaluator:
    """A scheduler and one minimal ``State`` whose timestamp is set per query.

    Args:
        scheduler: a ComposerScheduler (or any ``f(state, ssr) -> float``).
        max_duration: the run length, in ba, ep, sp or tok.
        clock: batch size in samples and tokens, and batches per epoch.
        base_lr: the optimizer's LR (1.0 plots the multiplier).
        ssr: the scale schedule ratio the Trainer would pass.
    """

    def __init__(self, scheduler: Any, max_duration: Time, clock: Clock, base_lr: float = 1.0, ssr: float = 1.0):
        self.scheduler = scheduler
        self.clock = clock
        self.ssr = ssr
        self.base_lr = base_lr
        model = torch.nn.Linear(1, 1)
        bpe = clock.batches_per_epoch
        self.state = State(
            model=model,
            rank_zero_seed=0,
            run_name="foundry-ext-plot",
            device=DeviceCPU(),
            max_duration=max_duration,
            # State keeps dataloader_len only with a dataloader; a range has the length and costs nothing
            dataloader=range(bpe) if bpe else None,
            dataloader_label="train" if bpe else None,
            dataloader_len=bpe if bpe else -1,
            optimizers=torch.optim.SGD(model.parameters(), lr=base_lr),
        )
        self.total_batches = clock.batches(max_duration)

    def set_batch(self, batch: int) -> State:
        """Move the state to the start of 0-indexed batch ``batch`` (``batch`` batches done) and return it."""
        spb = self.clock.samples_per_batch or 0
        tpb = self.clock.tokens_per_batch or 0
        bpe = self.clock.batches_per_epoch
        epoch, in_epoch = divmod(batch, bpe) if bpe else (0, batch)
        self.state.timestamp = Timestamp(
            epoch=epoch,
            batch=batch,
            sample=batch * spb,
            token=batch * tpb,
            batch_in_epoch=in_epoch,
            sample_in_epoch=in_epoch * spb,
            token_in_epoch=in_epoch * tpb,
        )
        return self.state

    def at(self, batch: int) -> float:
        """The multiplier the Trainer uses for 0-indexed batch ``batch``."""
        return float(self.scheduler(self.set_batch(batch), self.ssr))

    def to_batch(self, time: Time | str) -> int:
        """A scheduler duration as the first batch at which it has been reached (``dur`` and ``ep`` included)."""
        if isinstance(time, str):
            time = Time.from_timestring(time.strip())
        return self.clock.batches(convert(time, self.state, 1.0))


def boundaries(scheduler: Any, evaluator: ScheduleEvaluator, prefix: str = "") -> list[tuple[str, int]]:
    """Phase boundaries of ``scheduler`` in batches, labelled, for the schedules whose phases are named by fields.

    WSD: warmup end, decay start, decay end; Composer's and llm-foundry's ``*_with_warmup``: warmup end (and
    ``t_max``/cooldown start where they have one); multistep: each milestone; the plateau scheduler: its warmup and
    its ``base``'s boundaries. Others: none.
    """
    found: list[tuple[str, int]] = []
    total = evaluator.total_batches

    def add(label: str, time: Any) -> None:
        if time is None or isinstance(time, (int, float)):
            return
        try:
            batch = evaluator.to_batch(time)
        except (ValueError, RuntimeError, KeyError):
            return
        if 0 < batch < total:  # the ends of the run are drawn anyway
            found.append((prefix + label, batch))

    name = type(scheduler).__name__
    if name == "WarmupStableDecayScheduler":
        add("warmup end", scheduler.t_warmup)
        try:
            t_max = evaluator.to_batch(scheduler.t_max)
            decay = evaluator.to_batch(scheduler.t_decay)
        except (ValueError, RuntimeError, KeyError):
            return found
        for label, batch in (("decay start", t_max - decay), ("decay end", t_max)):
            if 0 < batch < total:
                found.append((prefix + label, batch))
        return found
    add("warmup end", getattr(scheduler, "t_warmup", None))
    for i, milestone in enumerate(getattr(scheduler, "milestones", None) or []):
        add(f"milestone {i + 1}", milestone)
    add("t_max", getattr(scheduler, "t_max", None))
    cooldown = getattr(scheduler, "t_cooldown", None)
    if cooldown is not None:
        try:
            start = total - evaluator.to_batch(cooldown)
            if 0 < start < total:
                found.append((prefix + "cooldown start", start))
        except (ValueError, RuntimeError, KeyError):
            pass
    base = getattr(scheduler, "base", None)
    if base is not None and callable(base):
        found += boundaries(base, evaluator, prefix="base " + prefix)
    return found


def sample_batches(total: int, points: int, exact: Iterable[int] = ()) -> list[int]:
    """About ``points`` evenly spaced batches in ``[0, total]``, plus each of ``exact`` and its neighbours."""
    step = max(1, total // max(1, points - 1))
    chosen = set(range(0, total + 1, step))
    chosen.add(total)
    for b in exact:
        chosen.update(x for x in (b - 1, b, b + 1) if 0 <= x <= total)
    return sorted(chosen)


@dataclass(frozen=True)
class PlateauCut:
    """A simulated cut: the evaluation's batch and the rule's :class:`Cut`."""

    batch: int
    cut: Cut


def simulate_plateau(
    scheduler: Any, evaluator: ScheduleEvaluator, metrics: Sequence[tuple[int, float]], base_lrs: Sequence[float]
) -> tuple[list[PlateauCut], int]:
    """Replay ``metrics`` (``(batch, value)`` in order) through the scheduler's :class:`PlateauRule`, as the adapter.

    Evaluations while the scheduler is in warmup only record the value, as the adapter does; the others go through
    ``rule.step``. A cut at the evaluation after batch ``b`` applies from batch ``b`` on (the adapter rescales the
    LR of the next batch).

    Returns:
        The cuts and how many evaluations were skipped because they fell in warmup.
    """
    plateau = PlateauState()
    cuts: list[PlateauCut] = []
    skipped = 0
    for batch, value in metrics:
        if scheduler.in_warmup(evaluator.set_batch(batch), evaluator.ssr):
            plateau.last_value = value
            skipped += 1
            continue
        cut = scheduler.rule.step(plateau, value, base_lrs)
        if cut is not None:
            cuts.append(PlateauCut(batch, cut))
    return cuts, skipped
