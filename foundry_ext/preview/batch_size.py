"""The steps of a run with a ``batch_size_schedule``: the batch, the tokens and the LR of every one, before training.

For step (0-indexed batch) ``k``, as the Trainer applies them (``foundry_ext.trainer.batch_size``):

* ``sample_k``: samples trained before it (``sample_0 = 0``, ``sample_{k+1} = sample_k + B_k``), ``token_k =
  sample_k * max_seq_len``;
* ``B_k``: the global batch of the stage ``sample_k`` is in;
* ``lr_k = lr * (m(T_{k-1}) * f(B_k))``: the schedule's multiplier ``m`` at Composer's timestamp after batch
  ``k - 1`` (batch ``k - 1``, ``sample_{k-1}``, ``token_{k-1}``; batch 0: the timestamp 0) times the stage's factor
  ``f`` (1, ``sqrt(B / B_0)`` or ``B / B_0``), in LambdaLR's order (``base_lr * lambda``, the lambda ``m * f``).

The multiplier is the schedule's formula for this package's own schedules and Composer's class, called on a
timestamp, for Composer's by name. ``torch_lr_scheduler`` is stepped once per batch whatever the batch's size, so its
multiplier is torch's LR after ``k - 1`` steps (batch 0: after 0), ``m(T_{k-1}) = torch(max(k - 1, 0))``, computed by
the engine the Trainer runs (:class:`~foundry_ext.preview.schedule.TorchPreview` on the ramp's ``N`` batches, so that
``OneCycleLR.total_steps`` is checked against them): the stage factor multiplies it and never enters torch's
arithmetic (``lr_k = lr * (torch(max(k - 1, 0)) * f(B_k))``). ``reduce_lr_on_plateau``'s multiplier is its time part
(``base(T_{k-1}) * min(1, T_{k-1} / t_warmup)``, each in its own unit at the ramp's timestamp) until a cut; its cuts
are decided by the evaluations, and :func:`replay_plateau` replays a past run's (the rule the callback applies, an
evaluation in the warmup not counted), each scaling the multiplier from the evaluation's batch on: ``m * s``, then
``lr * ((m * s) * f)``, the order of the callback's lambda and the ramp's wrapper.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from foundry_ext.catalog.batch_size import check_batch_size_schedule
from foundry_ext.catalog.registry import SCHEDULE_MODELS
from foundry_ext.config.base import build
from foundry_ext.config.durations import Duration, timestamp_of_batch
from foundry_ext.config.errors import ConfigError, Problem
from foundry_ext.config.train_yaml import RunClock, max_duration, optimizer_lr
from foundry_ext.preview.schedule import PlateauCut, simulate_plateau
from foundry_ext.schedules.base import run_check
from foundry_ext.schedules.batch_size import BatchPlan, in_ramp_batches
from foundry_ext.schedules.plateau_rule import PlateauRule

__all__ = [
    "MAX_PREVIEW_STEPS",
    "PlateauReplay",
    "RampStep",
    "is_plateau",
    "ramp_steps",
    "replay_plateau",
    "stage_lines",
]

#: The most steps a ramp's preview computes (each step two records: 2,000,000 took 4 s of CPU and 413 MB to list, before
#: their LRs; the fuzzers' bound is 10 CPU s and 2 GB per command: tests/catalog/test_fuzz_ramp_fsdp.py)
MAX_PREVIEW_STEPS = 500_000


@dataclass(frozen=True)
class RampStep:
    """One optimizer step of a ramped run, as the Trainer trains it."""

    batch: int
    sample: int
    token: int
    size: int
    stage: int
    factor: float
    multiplier: float  #: the schedule's, at the timestamp Composer evaluates it for this batch
    lr: float


@dataclass(frozen=True)
class PlateauReplay:
    """``reduce_lr_on_plateau``'s cuts replayed on a ramp's steps (:func:`replay_plateau`)."""

    monitor: str
    rule: PlateauRule
    base_lr: float  #: ``optimizer.lr`` (1 when the YAML has none: the multiplier)
    metrics: list[tuple[int, float]] | None  #: the evaluations before the end of the run (None: none replayed)
    cuts: list[PlateauCut]
    skipped: int  #: evaluations in the warmup (not counted, as in training)
    ignored: int  #: rows at or after the end of the run


def is_plateau(cfg: Mapping[str, Any]) -> bool:
    """Whether ``cfg``'s scheduler is ``reduce_lr_on_plateau`` (its cuts come from the evaluations)."""
    block = cfg.get("scheduler")
    name = block.get("name") if isinstance(block, Mapping) else None
    model_cls = SCHEDULE_MODELS.get(name) if isinstance(name, str) else None
    return model_cls is not None and model_cls.kind == "plateau"


def _formula(cfg: Mapping[str, Any], md: Duration) -> tuple[Any, Callable[[int, int, int], int], dict[str, int]]:
    """This package's formula schedule of ``cfg``: its model, ``(batch, sample, token) -> now``, its durations.

    ``now`` picks the timestamp's count in the unit the durations were resolved in.
    """
    block = dict(cfg["scheduler"])
    model = build(SCHEDULE_MODELS[block.pop("name")], block)
    check = run_check(model, md, None)
    if check.errors:
        raise ConfigError(check.errors)
    d = check.resolved
    assert d is not None
    index = {"ba": 0, "sp": 1, "tok": 2}[d.unit]
    return model, lambda b, s, t: (b, s, t)[index], d.values


def _multiplier_fn(cfg: Mapping[str, Any], md: Duration, total: int) -> Callable[[int, int, int], float]:
    """``(batch, sample, token) -> multiplier`` at that timestamp, the way the run's scheduler computes it.

    ``total``: the ramp's batches (a torch scheduler counts steps, one per batch). ``reduce_lr_on_plateau``: its time
    part, its ``base`` (any scheduler) evaluated the same way.
    """
    block = dict(cfg.get("scheduler") or {})
    name = block.pop("name", None)
    model_cls = SCHEDULE_MODELS.get(name) if isinstance(name, str) else None
    if model_cls is not None and model_cls.has_formula:
        if model_cls.kind == "torch":
            return _torch_fn(cfg, total)
        model, now, d = _formula(cfg, md)
        if model_cls.kind == "plateau":
            base = block.get("base")
            base_fn = _multiplier_fn({**cfg, "scheduler": base}, md, total) if isinstance(base, Mapping) else None
            return lambda b, s, t: model.time_multiplier(now(b, s, t), d, 1.0 if base_fn is None else base_fn(b, s, t))
        return lambda b, s, t: model.multiplier(now(b, s, t), d)
    return _composer_fn(name, block, md)  # type: ignore[arg-type]  # Composer's, llm-foundry's, other plugins'


def _torch_fn(cfg: Mapping[str, Any], total: int) -> Callable[[int, int, int], float]:
    """``torch_lr_scheduler``: torch's LR after ``batch`` steps, by the pipeline's :class:`TorchPreview`.

    Its clock is the ramp's ``total`` batches (``max_duration`` in tokens or samples says nothing of the steps once the
    batch grows): the run checks (``OneCycleLR.total_steps``) see the steps the run will take.
    """
    from foundry_ext.preview.schedule import build_schedule

    clock = RunClock(Duration(total, "ba"))
    try:
        schedule = build_schedule(cfg["scheduler"], clock)
    except ConfigError as e:
        raise ConfigError(in_ramp_batches(e.problems, max_duration(cfg), total)) from None
    return lambda b, s, t: schedule.multiplier(b)


def _composer_fn(name: str, block: dict[str, Any], md: Duration) -> Callable[[int, int, int], float]:
    """Composer's (or llm-foundry's) class, called on a timestamp: what ``compile_composer_scheduler`` calls."""
    from types import SimpleNamespace

    from composer.core import Time, Timestamp
    from llmfoundry.registry import schedulers

    scheduler = schedulers.get(name)(**block)
    state = SimpleNamespace(max_duration=Time.from_timestring(str(md)), dataloader_len=None, timestamp=None)

    def call(b: int, s: int, t: int) -> float:
        state.timestamp = Timestamp(batch=b, sample=s, token=t)
        return float(scheduler(state))  # type: ignore[arg-type]

    return call


def ramp_steps(cfg: Mapping[str, Any], world_size: int = 1) -> tuple[BatchPlan, list[RampStep]]:
    """Every step of ``cfg``'s run with its ramp.

    Raises:
        ConfigError: the ramp or the schedule has problems (every one), or the run length is in epochs.
    """
    plan, problems, _ = check_batch_size_schedule(cfg, world_size)
    if problems:
        raise ConfigError(problems)
    if plan is None:
        raise ConfigError("batch_size_schedule", "missing")
    seq_len = cfg.get("max_seq_len")
    assert isinstance(seq_len, int)  # checked with the ramp's points
    md = max_duration(cfg)
    if md.unit == "ep":
        raise ConfigError([Problem("max_duration", f"'{md}': a ramped run's steps are previewed for a max_duration in "
                                   "tok, sp or ba")])  # fmt: skip
    count = plan.step_count(md, seq_len)
    if count > MAX_PREVIEW_STEPS:  # every step is a record: a run of 10**14 steps would fill the memory first
        raise ConfigError([Problem("max_duration", f"'{md}' is {count:,} steps with this batch_size_schedule; "
                                   f"validate and plot compute every step of a ramp, at most {MAX_PREVIEW_STEPS:,}: "
                                   "preview a shorter max_duration (training is not limited)")])  # fmt: skip
    plan_steps = plan.run_steps(md, seq_len)
    multiplier = _multiplier_fn(cfg, md, len(plan_steps))
    lr = optimizer_lr(cfg) or 1.0
    steps = []
    for k, step in enumerate(plan_steps):
        before = plan_steps[timestamp_of_batch(k)]  # Composer's timestamp when it set this batch's LR
        m = multiplier(before.batch, before.sample, before.sample * seq_len)
        # LambdaLR sets base_lr * lambda, and the ramp's lambda is the schedule's value times the factor: in that
        # order, or (lr * m) * f differs from the optimizer's LR in the last bit for about a third of the values
        steps.append(
            RampStep(step.batch, step.sample, step.sample * seq_len, step.size, step.stage, step.factor, m,
                     lr * (m * step.factor))
        )  # fmt: skip
    return plan, steps


def replay_plateau(
    cfg: Mapping[str, Any], steps: list[RampStep], metrics: Sequence[tuple[int, float]] | None
) -> tuple[list[RampStep], PlateauReplay]:
    """``steps`` (:func:`ramp_steps` of a ``reduce_lr_on_plateau`` run) with the cuts a past run's ``metrics`` make.

    ``metrics``: ``(timestamp batch, value)`` rows, in order (``plot --metrics``); None: no cut, the steps as given.

    An evaluation at timestamp batch ``t`` is in the warmup when the ramp's timestamp there (``t`` batches, the samples
    and tokens they trained) is before ``t_warmup``; a cut there scales every batch from ``t`` on, as in training.
    """
    seq_len = int(cfg["max_seq_len"])
    model, now, d = _formula(cfg, max_duration(cfg))
    end = steps[-1].sample + steps[-1].size

    @dataclass(frozen=True)
    class RampTime:
        rule: PlateauRule

        def in_warmup(self, t: int) -> bool:
            sample = steps[t].sample if t < len(steps) else end
            return now(t, sample, sample * seq_len) < d["t_warmup"]

    lr, rule = optimizer_lr(cfg) or 1.0, model.rule()
    if metrics is None:
        return steps, PlateauReplay(model.monitor, rule, lr, None, [], 0, 0)
    kept = [(b, v) for b, v in metrics if b < len(steps)]
    cuts, skipped = simulate_plateau(RampTime(rule), kept, [lr])
    scales = [1.0] + [c.cut.new_scale for c in cuts]
    at = [c.batch for c in cuts]
    scaled = []
    for st in steps:
        m = st.multiplier * scales[bisect.bisect_right(at, st.batch)]  # the callback's lambda: time part x scale
        scaled.append(dataclasses.replace(st, multiplier=m, lr=lr * (m * st.factor)))
    return scaled, PlateauReplay(model.monitor, rule, lr, kept, cuts, skipped, len(metrics) - len(kept))


def stage_lines(plan: BatchPlan, steps: list[RampStep], cfg: Mapping[str, Any]) -> list[str]:
    """One line per stage (its steps, tokens, batch, LR factor), then what each duration given in batches spans."""
    seq_len = int(cfg["max_seq_len"])
    lines = []
    for stage, size in enumerate(plan.sizes):
        mine = [s for s in steps if s.stage == stage]
        if not mine:
            lines.append(f"stage {stage}: global batch {size}: not reached before max_duration")
            continue
        first, last = mine[0], mine[-1]
        end = last.token + last.size * seq_len
        lines.append(
            f"stage {stage}: global batch {size}, batches {first.batch}-{last.batch} ({len(mine)} steps), tokens "
            f"{first.token}-{end} (samples {first.sample}-{last.sample + last.size}), LR x {first.factor:.6g}"
        )
    for field, value in _batch_durations(cfg):
        n = min(int(value), len(steps))
        end = steps[-1].token + steps[-1].size * seq_len
        first = steps[n].token if n < len(steps) else end
        last = end - steps[len(steps) - n].token if n else 0
        lines.append(
            f"{field}={value}ba while the batch grows: the first {n} batches span {first} tokens, the last {n} "
            f"{last} tokens (at the fixed global batch {plan.base}: {n * plan.base * seq_len} tokens)"
        )
    return lines


def _batch_durations(cfg: Mapping[str, Any]) -> list[tuple[str, int]]:
    """Durations given in batches: the scheduler's keys, max_duration, eval_interval, save_interval."""
    from foundry_ext.config.durations import DurationError, parse

    found = []
    block = cfg.get("scheduler") if isinstance(cfg.get("scheduler"), Mapping) else {}
    candidates = [(f"scheduler.{k}", v) for k, v in block.items() if k != "name"]
    candidates += [(k, cfg.get(k)) for k in ("max_duration", "eval_interval", "save_interval")]
    for field, value in candidates:
        if not isinstance(value, str):
            continue
        try:
            d = parse(value)
        except DurationError:
            continue
        if d.unit == "ba":
            found.append((field, int(d.value)))
    return found
