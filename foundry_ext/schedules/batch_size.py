"""Batch-size warmup: the global batch of every step and the LR factor that follows it, as pure functions.

A train YAML asks for it at the top level, beside ``global_train_batch_size`` (the first stage's batch)::

    global_train_batch_size: 8
    batch_size_schedule:
      stages:
        - {at: 20480tok, global_train_batch_size: 16}
        - {at: 61440tok, global_train_batch_size: 32}
      lr_scaling: sqrt

Everything is decided in samples, which Composer's timestamp counts exactly (``state.timestamp.sample``): a point in
tokens is converted at ``max_seq_len`` tokens per sample (llm-foundry's ``text`` loader yields sequences of exactly
``max_seq_len`` tokens from concatenated, pre-tokenised MDS data), rounded up to a whole sample. A stage starts with
the first batch whose start (the samples trained before it) is at or past its point; a point inside a batch takes
effect at the next batch. Points in batches are refused: once the batch grows, "batch 40" means a different number
of samples in each ramp.

The LR the optimizer receives for a batch is the schedule's value (its own rule: Composer steps the LambdaLR at the
end of batch ``b - 1``, at timestamp ``b - 1``) times the factor of the stage *that batch* trains in::

    factor = 1                      (lr_scaling: none)
    factor = sqrt(B / B_0)          (lr_scaling: sqrt, as OLMo-core's BatchSizeSchedulerCallback and Seesaw)
    factor = B / B_0                (lr_scaling: linear)

with ``B`` the batch's global batch and ``B_0`` the first stage's. Since the stage is a function of the samples
trained so far, and those are in every checkpoint, the batch and the factor of every step after a resume are those of
the uninterrupted run.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from pydantic import Field, field_validator

from foundry_ext.config.base import ConfigModel, PositiveDuration
from foundry_ext.config.durations import Duration
from foundry_ext.config.errors import Problem

__all__ = ["FIELD", "BatchPlan", "BatchSizeSchedule", "BatchStage", "Step", "plan_of"]

#: The top-level YAML key.
FIELD = "batch_size_schedule"
LR_SCALINGS = ("none", "sqrt", "linear")


class BatchStage(ConfigModel):
    """One stage: from the point ``at`` on (in tokens or samples), this global batch (samples)."""

    at: PositiveDuration = Field(
        description="where the stage starts: tokens or samples trained before it (e.g. 20480tok, 160sp)",
        json_schema_extra={"x-allowed": "a duration in tok or sp, > 0"},
    )
    global_train_batch_size: int = Field(
        ge=1, description="the global batch (samples) from that point on: a whole multiple of global_train_batch_size"
    )

    @field_validator("at")
    @classmethod
    def _tokens_or_samples(cls, value: Duration) -> Duration:
        if value.unit == "ba":
            raise ValueError(
                f"'{value}' is in batches, which are ambiguous once the batch grows; allowed: a point in tokens or "
                "samples (tok, sp), e.g. '20480tok'"
            )
        if value.unit not in ("tok", "sp"):
            raise ValueError(f"'{value}' is not allowed; allowed: a point in tokens or samples (tok, sp)")
        return value


class BatchSizeSchedule(ConfigModel):
    """``batch_size_schedule`` in a train YAML: grow the global batch in stages, the LR following it.

    Args:
        stages (list[BatchStage]): From each point on, that global batch; points strictly increasing.
        lr_scaling (str): How the LR follows the batch: ``none``, ``sqrt`` (the LR times ``sqrt(B / B_0)``) or
            ``linear`` (times ``B / B_0``). Default = ``"none"``.
    """

    stages: list[BatchStage] = Field(
        min_length=1, description="from each point on, this global batch; points in tok or sp, increasing"
    )
    lr_scaling: Literal["none", "sqrt", "linear"] = Field(
        default="none", description="the LR times 1 (none), sqrt(B / B_0) (sqrt) or B / B_0 (linear)"
    )


@dataclass(frozen=True)
class Step:
    """One optimizer step of a ramped run."""

    batch: int  #: 0-indexed batch (Composer's ``timestamp.batch`` before it)
    sample: int  #: samples trained before it
    size: int  #: its global batch (samples)
    stage: int  #: 0: ``global_train_batch_size``; ``i``: ``stages[i - 1]``
    factor: float  #: the LR factor of its stage


@dataclass(frozen=True)
class BatchPlan:
    """A validated schedule in samples: ``starts[i]`` is where ``sizes[i]`` starts (``starts[0] == 0``)."""

    starts: tuple[int, ...]
    sizes: tuple[int, ...]
    lr_scaling: str = "none"

    @property
    def base(self) -> int:
        """The first stage's global batch, ``global_train_batch_size``."""
        return self.sizes[0]

    def stage_at(self, sample: int) -> int:
        """The stage of a batch that starts after ``sample`` samples."""
        stage = 0
        for i, start in enumerate(self.starts):
            if sample >= start:
                stage = i
        return stage

    def size_at(self, sample: int) -> int:
        """The global batch of a batch that starts after ``sample`` samples."""
        return self.sizes[self.stage_at(sample)]

    def factor(self, stage: int) -> float:
        """The LR factor of ``stage``: 1, ``sqrt(B / B_0)`` or ``B / B_0``."""
        ratio = self.sizes[stage] / self.sizes[0]
        return {"none": 1.0, "sqrt": math.sqrt(ratio), "linear": ratio}[self.lr_scaling]

    def next_factor(self, sample: int) -> float:
        """The factor of the batch after the one that starts at ``sample``: what a LambdaLR step at that time sets."""
        return self.factor(self.stage_at(sample + self.size_at(sample)))

    def steps(self, *, samples: int | None = None, batches: int | None = None) -> Iterator[Step]:
        """Every step of a run of ``samples`` (the Trainer stops after the batch that reaches it) or ``batches``."""
        if (samples is None) == (batches is None):
            raise ValueError("give samples or batches")
        batch = sample = 0
        while (sample < samples) if samples is not None else (batch < batches):  # type: ignore[operator]
            stage = self.stage_at(sample)
            yield Step(batch, sample, self.sizes[stage], stage, self.factor(stage))
            sample += self.sizes[stage]
            batch += 1

    def step_count(self, max_duration: Duration, tokens_per_sample: int) -> int:
        r"""How many steps :meth:`run_steps` gives, from the stages alone (without listing them).

        .. math::
            n = \sum_i \left\lceil \frac{\min(s_{i+1}, S) - x_i}{B_i} \right\rceil^+, \qquad
            x_{i+1} = x_i + n_i B_i

        for stage ``i`` of batch ``B_i`` from sample ``s_i`` (``s_{last+1} = S``, the run's samples), ``x_i`` the
        samples trained when it starts, ``n_i`` its steps (0 when ``x_i`` is already past its end: a stage skipped).

        Raises:
            ValueError: ``max_duration`` is in another unit than ``tok``, ``sp`` or ``ba``.
        """
        unit, total = _run_length(max_duration, tokens_per_sample)
        if unit == "batches":
            return total
        count = sample = 0
        for i, size in enumerate(self.sizes):
            end = min(self.starts[i + 1], total) if i + 1 < len(self.starts) else total
            if sample < end:
                n = -(-(end - sample) // size)
                count, sample = count + n, sample + n * size
        return count

    def run_steps(self, max_duration: Duration, tokens_per_sample: int) -> list[Step]:
        """Every step of a run of ``max_duration`` (``tok``, ``sp`` or ``ba``; tokens rounded up to whole samples).

        Raises:
            ValueError: ``max_duration`` is in another unit (epochs: their batches depend on where the ramp is).
        """
        unit, total = _run_length(max_duration, tokens_per_sample)
        return list(self.steps(**{unit: total}))


def _run_length(max_duration: Duration, tokens_per_sample: int) -> tuple[str, int]:
    """``("samples", n)`` for ``tok`` (rounded up to whole samples) or ``sp``, ``("batches", n)`` for ``ba``.

    Raises:
        ValueError: another unit (epochs: their batches depend on where the ramp is).
    """
    if max_duration.unit == "tok":
        return "samples", math.ceil(max_duration.value / tokens_per_sample)
    if max_duration.unit == "sp":
        return "samples", int(max_duration.value)
    if max_duration.unit == "ba":
        return "batches", int(max_duration.value)
    raise ValueError(f"max_duration {max_duration}: a ramped run's steps are counted for tok, sp or ba")


def in_ramp_batches(problems: list[Problem], max_duration: Duration, batches: int) -> list[Problem]:
    """Problems of a check run on a clock of the ramp's ``batches`` (``max_duration={batches}ba``), saying so.

    A schedule counted in steps (``torch_lr_scheduler``) is checked against the steps of the ramp; its message names
    the YAML's ``max_duration`` and that count: ``max_duration=32768tok: 13 batches of the ramp``.
    """
    said = f"max_duration={max_duration}: {batches} batches of the ramp"
    return [Problem(p.field, p.message.replace(f"max_duration={batches}ba", said)) for p in problems]


def plan_of(
    schedule: BatchSizeSchedule, base: int, tokens_per_sample: int | None, path: str = FIELD
) -> tuple[BatchPlan | None, list[Problem]]:
    """The schedule in samples, or the problems (one line each): multiples of ``base``, increasing points."""
    problems: list[Problem] = []
    starts, sizes = [0], [base]
    previous = 0
    for i, stage in enumerate(schedule.stages):
        where = f"{path}.stages[{i}]"
        if stage.global_train_batch_size % base:
            problems.append(
                Problem(
                    f"{where}.global_train_batch_size",
                    f"{stage.global_train_batch_size} is not a whole multiple of global_train_batch_size {base}; "
                    f"allowed: {base}, {2 * base}, {3 * base}, ...",
                )
            )
        at = stage.at
        if at.unit == "tok":
            if not tokens_per_sample:
                problems.append(Problem(f"{where}.at", f"'{at}' needs max_seq_len (tokens per sample); give it in sp"))
                continue
            start = math.ceil(at.value / tokens_per_sample)
        else:
            start = int(at.value)
        if start <= previous:
            shown = f"'{at}'" + (f" ({start} samples)" if at.unit == "tok" else "")
            problems.append(
                Problem(
                    f"{where}.at",
                    f"{shown} is not after the previous stage's start ({previous} samples); allowed: points strictly "
                    "increasing, each stage once",
                )
            )
        previous = max(previous, start)
        starts.append(start)
        sizes.append(stage.global_train_batch_size)
    if problems:
        return None, problems
    return BatchPlan(tuple(starts), tuple(sizes), schedule.lr_scaling), []
