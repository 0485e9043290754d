r"""A branch of a run with a ``batch_size_schedule``: its stage at the checkpoint, the decay in the ramp's units.

A ramped run's global batch grows with the samples trained (docs/batch_size.md), so its checkpoint's samples over
batches is an average, not a batch size, and "N batches" spans a different number of tokens in each stage. A branch of
a ramped run keeps the ramp (the stable run's ``batch_size_schedule``, checked against the one the checkpoint saved)
and writes its schedule in the unit ``--decay`` is given in, from the checkpoint's point :math:`(s, n_s, k_s)`
(batches, samples, tokens trained):

* ``tok`` (``sp``): ``t_decay_start: {k_s}tok`` and ``max_duration: {k_s + LEN}tok``. The decay's shape is a function
  of the tokens, as a planned ramped ``warmup_stable_decay`` run's with ``t_decay: LEN`` and ``max_duration`` in
  tokens, across a stage change too; its batches are the ramp's over those tokens (``LEN`` must end where a batch of
  the ramp ends: the error names the two nearest lengths that do).
* ``ba``: ``LEN`` batches of the ramp from batch :math:`s`, the decay a function of the batch count
  (``t_decay_start: {s}ba``); inside one stage it is the same decay as in tokens, across a stage change it is not.
* ``dur``: refused: "a fraction of the branched run" is ambiguous once the batch grows; give tok, sp or ba.

The LR the checkpoint holds for batch :math:`s` is :math:`\eta\, m\, f` with :math:`f` the factor of the stage batch
:math:`s` trains in (``lr_scaling``): the stable phase is :math:`m = 1`, i.e. an LR of :math:`\eta f`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from foundry_ext.anneal.options import AnnealError
from foundry_ext.config.durations import Duration, DurationError, parse
from foundry_ext.schedules.batch_size import BatchPlan

__all__ = ["RampBranch", "last_lr", "plan_of_checkpoint", "ramp_branch"]

#: Where Composer keeps the ramp callback's state in a checkpoint (keyed by the class ``__qualname__``).
CALLBACK_KEY = "BatchSizeScheduleCallback"
_UNIT_INDEX = {"ba": 0, "sp": 1, "tok": 2}


class Point(NamedTuple):
    """The start of a batch of a ramped run: batches, samples and tokens trained before it."""

    batch: int
    sample: int
    token: int

    def value(self, unit: str) -> int:
        return self[_UNIT_INDEX[unit]]


def plan_of_checkpoint(callbacks: Any) -> BatchPlan | None:
    """The ramp a checkpoint's ``state.callbacks`` saved (``None``: not a ramped run)."""
    saved = callbacks.get(CALLBACK_KEY) if isinstance(callbacks, Mapping) else None
    if not isinstance(saved, Mapping) or not saved.get("sizes"):
        return None
    starts, sizes = saved.get("starts"), saved.get("sizes")
    if not isinstance(starts, list) or not isinstance(sizes, list) or len(starts) != len(sizes):
        raise TypeError(CALLBACK_KEY)
    return BatchPlan(tuple(int(v) for v in starts), tuple(int(v) for v in sizes), str(saved.get("lr_scaling", "none")))


def points(plan: BatchPlan, seq_len: int, stop: int, unit: str) -> list[Point]:
    """The start of every batch of the ramp up to the first whose ``unit`` value is at or past ``stop``."""
    batch = sample = 0
    out = [Point(0, 0, 0)]
    while out[-1].value(unit) < stop:
        sample += plan.size_at(sample)
        batch += 1
        out.append(Point(batch, sample, sample * seq_len))
    return out


@dataclass(frozen=True)
class RampBranch:
    """A ramped branch's schedule: the decay from ``start`` to ``end`` (in ``unit``), ``length`` batches of the ramp."""

    plan: BatchPlan
    seq_len: int
    unit: str
    start: Point
    end: Point
    factor: float  #: the LR factor of the stage batch ``s`` trains in
    last_factor: float  #: the LR factor of the branch's last batch
    warmup: str | None  #: the stable run's ``t_warmup`` in ``unit`` (clipped to ``start``), when it lands on a batch

    @property
    def length(self) -> int:
        return self.end.batch - self.start.batch

    @property
    def max_duration(self) -> str:
        return f"{self.end.value(self.unit)}{self.unit}"

    def scheduler(self, shape: str, alpha: float) -> dict[str, Any]:
        """The branch's ``warmup_stable_decay`` block, its durations in ``unit``."""
        warmup = {"t_warmup": self.warmup} if self.warmup is not None else {}
        start = f"{self.start.value(self.unit)}{self.unit}"
        return {"name": "warmup_stable_decay", **warmup, "t_decay_start": start, "decay_type": shape, "alpha_f": alpha}


def ramp_branch(
    cfg: Mapping[str, Any], plan: BatchPlan, batch: int, sample: int, token: int, decay: Duration, text: str
) -> RampBranch:
    """The branch of the checkpoint at ``(batch, sample, token)`` of a run trained with ``plan``.

    Raises:
        AnnealError: the config's ramp is not the checkpoint's, ``--decay`` in ``dur`` or not ending on a batch of the
            ramp, or a branch past the stable run's ``max_duration``.
    """
    from foundry_ext.catalog.batch_size import check_batch_size_schedule

    mine, problems, _ = check_batch_size_schedule(cfg, 1)
    saved = f"{', '.join(f'{b} from sample {a}' for a, b in zip(plan.starts, plan.sizes, strict=True))} " + (
        f"(lr_scaling {plan.lr_scaling})"
    )
    if problems or mine is None or mine != plan:
        raise AnnealError(
            f"batch_size_schedule: the checkpoint's run grew its batch as {saved}; the config's "
            f"{'is another' if mine is not None else 'has none' if not problems else 'is not valid'}: keep the "
            "stable run's batch_size_schedule (the branch continues its batches)"
        )
    seq_len = int(cfg["max_seq_len"])  # checked with the ramp's points
    if token != sample * seq_len:
        raise AnnealError(f"max_seq_len: {seq_len}, but the checkpoint trained {token} tokens in {sample} samples")
    shown = f"--decay {text}"
    if decay.unit == "dur":
        raise AnnealError(
            f"{shown}: a fraction of the branched run is ambiguous once the batch grows (batch_size_schedule); "
            "give the decay in tokens, samples or batches, e.g. '8192tok'"
        )
    unit = decay.unit
    start = Point(batch, sample, token)
    stop = start.value(unit) + int(decay.value)
    ends = [p for p in points(plan, seq_len, stop, unit) if p.batch > batch]
    if not ends or ends[-1].value(unit) != stop:
        shorter = [p.value(unit) - start.value(unit) for p in ends[:-1]]
        near = ", ".join(f"{v}{unit}" for v in [*shorter[-1:], ends[-1].value(unit) - start.value(unit)])
        raise AnnealError(
            f"{shown}: does not end where a batch of the ramp ends (batch_size_schedule: {saved}, from batch {batch}); "
            f"give a length that does, e.g. {near}"
        )
    end = ends[-1]
    budget = cfg.get("max_duration")
    try:
        limit = parse(budget) if isinstance(budget, str) else None
    except DurationError:
        limit = None
    if limit is not None and limit.unit in _UNIT_INDEX and end.value(limit.unit) > limit.value:
        raise AnnealError(
            f"{shown}: the branch would end at {end.value(limit.unit)}{limit.unit} (batch {end.batch}), past the "
            f"run's budget max_duration={budget}; shorten the decay, or raise the budget with max_duration=..."
        )
    last = points(plan, seq_len, end.batch - 1, "ba")[-1]  # the branch's last batch starts there
    return RampBranch(
        plan,
        seq_len,
        unit,
        start,
        end,
        plan.factor(plan.stage_at(sample)),
        plan.factor(plan.stage_at(last.sample)),
        _warmup(cfg, plan, seq_len, start, unit),
    )


def _warmup(cfg: Mapping[str, Any], plan: BatchPlan, seq_len: int, start: Point, unit: str) -> str | None:
    """The stable run's ``t_warmup`` in ``unit``, clipped to the branch's start (only the LRs before it use it)."""
    block = cfg.get("scheduler")
    value = block.get("t_warmup") if isinstance(block, Mapping) else None
    try:
        warmup = parse(value) if isinstance(value, str) else None
    except DurationError:
        return None
    if warmup is None or warmup.unit not in _UNIT_INDEX:
        return None
    at = [p for p in points(plan, seq_len, int(warmup.value), warmup.unit) if p.value(warmup.unit) == warmup.value]
    if not at:
        return None
    return f"{min(at[0].value(unit), start.value(unit))}{unit}"


def last_lr(branch_cfg: Mapping[str, Any]) -> float:
    """The LR of the branch's last batch, as the Trainer applies it: the ramp's preview of the branch's config.

    That is :func:`foundry_ext.preview.batch_size.ramp_steps`, the one path from a ramped YAML to the LR of every
    batch (``plot`` and ``validate`` show it; tests/batch_size/test_ramp_training.py holds it to a real run's bits).
    """
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.preview.batch_size import ramp_steps

    try:
        _, steps = ramp_steps(branch_cfg)
    except ConfigError as e:  # a stable warmup that does not fit the branch: said as the key it came from
        raise AnnealError(f"CONFIG: {'; '.join(str(p) for p in e.problems)}") from None
    if not math.isfinite(steps[-1].lr):
        raise AnnealError("the branch's LR is not finite")
    return steps[-1].lr
