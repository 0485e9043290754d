"""The :class:`Schedule` of a scheduler block: its multiplier at any timestamp, by the cheapest exact route.

The LR pipeline (:mod:`foundry_ext.preview.pipeline`) turns it into the LR of every batch of a run, before the run:
what ``foundry-ext plot``, ``validate``, ``law`` and ``anneal`` show.

**Composer's order.** Composer 0.32 steps the ``LambdaLR`` at the end of batch ``k`` *before* it advances the
timestamp (``composer/trainer/trainer.py``, ``_train_loop``: ``scheduler.step()``, then ``timestamp.to_next_batch``).
So 0-indexed batch ``b`` trains with the multiplier evaluated at timestamp ``b - 1`` (batch 0 with the one at 0), and
a run of ``N`` batches trains batches ``0 .. N - 1``. :func:`~foundry_ext.config.durations.timestamp_of_batch` is the
one place this rule lives; ``tests/preview/test_preview.py`` checks the pipeline's LRs against a real
``Trainer.fit()`` with ``lr_monitor`` for every scheduler family.

**Plateau cuts.** An evaluation runs after ``T`` batches (timestamp ``T``); a cut it decides rescales the LR of the
next batch, ``T`` (0-indexed), and every later step carries it. So the scale in effect for batch ``b`` is the one
after every evaluation at a timestamp ``<= b``.

**Which code computes the multiplier.** For this package's schedules the model's own formula
(:meth:`~foundry_ext.schedules.base.ScheduleModel.multiplier`, the code the Trainer runs through the adapter),
without Composer; ``torch_lr_scheduler`` through its torch engine (torch, not Composer); anything else is called on
a real Composer ``State``: Composer's schedules by name and llm-foundry's built from their own classes (the models
name them), other plugins' through llm-foundry's registry.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from foundry_ext.catalog.registry import validate_block
from foundry_ext.config.errors import ConfigError, Problem
from foundry_ext.config.train_yaml import RunClock
from foundry_ext.schedules.base import RunCheck, ScheduleModel, run_check
from foundry_ext.schedules.plateau_rule import Cut, PlateauRule, PlateauState

__all__ = [
    "Mark",
    "PlateauCut",
    "Schedule",
    "build_schedule",
    "multipliers_of",
    "simulate_plateau",
]


@dataclass(frozen=True)
class Mark:
    """A named point of a schedule, at the first batch that trains in the new phase."""

    label: str
    batch: int


class Schedule(Protocol):
    """A scheduler's multiplier as a function of the timestamp in batches."""

    def multiplier(self, t: int) -> float:
        """The multiplier at timestamp ``t`` (``t`` batches done)."""

    def marks(self) -> list[Mark]:
        """Named points (warmup end, milestones, restarts, ...)."""


def multipliers_of(schedule: Schedule, ts: np.ndarray) -> np.ndarray:
    """``schedule.multiplier`` of every timestamp of ``ts`` (int64).

    Its ``multipliers`` on the whole array where it has one (bitwise the same values), else one call per timestamp, in
    order (a Composer scheduler has no array form).
    """
    fast = getattr(schedule, "multipliers", None)
    if fast is not None:
        return np.asarray(fast(ts), dtype=np.float64)
    return np.fromiter(map(schedule.multiplier, ts.tolist()), dtype=np.float64, count=len(ts))


def _model_marks(model: ScheduleModel, check: RunCheck, clock: RunClock) -> list[Mark]:
    """The model's named points as marks: a phase starting at timestamp ``T`` is first trained by batch ``T + 1``.

    (Batch ``b`` trains with the multiplier at ``b - 1``:
    :func:`~foundry_ext.config.durations.timestamp_of_batch`.)
    """
    assert check.resolved is not None
    return [
        Mark(label, clock.batches(value, unit) + 1)
        for label, value, unit in model.marks(check.resolved.values, check.units, check.total)
    ]


class FormulaSchedule:
    """This package's schedule model, evaluated by its own formula (no Composer)."""

    def __init__(self, model: ScheduleModel, clock: RunClock, path: str = "scheduler") -> None:
        check = run_check(model, clock.max_duration, clock.batches_per_epoch, 1.0, path)
        if check.errors:
            raise ConfigError(check.errors)
        assert check.resolved is not None
        self.model = model
        self.clock = clock
        self.warnings: list[Problem] = check.warnings
        self._check = check
        self._d = check.resolved.values
        self._unit = check.resolved.unit

    def multiplier(self, t: int) -> float:
        return float(self.model.multiplier(self.clock.now(t, self._unit), self._d))

    def multipliers(self, ts: np.ndarray) -> np.ndarray:
        """:meth:`multiplier` of every timestamp of ``ts`` (int64), on the whole array: bitwise the same values."""
        return self.model.multipliers(self._now(ts), self._d)

    def _now(self, ts: np.ndarray) -> np.ndarray:
        per = 1 if self._unit == "ba" else self.clock.per_batch(self._unit)
        if per is None:
            self.clock.now(0, self._unit)  # raises, naming the unit
        return ts if per == 1 else ts * per

    def in_warmup(self, t: int) -> bool:
        """Plateau: whether timestamp ``t`` is before the end of ``t_warmup``."""
        return self.clock.now(t, self._unit) < self._d["t_warmup"]

    def marks(self) -> list[Mark]:
        return _model_marks(self.model, self._check, self.clock)


class TorchPreview(FormulaSchedule):
    """``torch_lr_scheduler``: torch's own scheduler through the engine the adapter uses (torch, no Composer)."""

    def __init__(self, model: ScheduleModel, clock: RunClock, path: str = "scheduler") -> None:
        super().__init__(model, clock, path)
        from foundry_ext.trainer.torch_engine import TorchSchedule

        self.engine = TorchSchedule(model.type, model.torch_kwargs())  # type: ignore[attr-defined]

    def multiplier(self, t: int) -> float:
        return float(self.engine.at(t))

    def multipliers(self, ts: np.ndarray) -> np.ndarray:
        """Torch's scheduler has no formula on arrays: stepped batch by batch (in order, one step each)."""
        return np.fromiter(map(self.multiplier, ts.tolist()), dtype=np.float64, count=len(ts))


class PlateauPreview(FormulaSchedule):
    """``reduce_lr_on_plateau`` without cuts, ``base(t) * min(1, t / t_warmup)``; cuts: :func:`simulate_plateau`."""

    def __init__(self, model: ScheduleModel, clock: RunClock, path: str = "scheduler") -> None:
        super().__init__(model, clock, path)
        base = model.base  # type: ignore[attr-defined]
        self.base: Schedule | None = build_schedule(base, clock, f"{path}.base") if isinstance(base, Mapping) else None
        self.warnings += getattr(self.base, "warnings", [])
        self.rule = model.rule()  # type: ignore[attr-defined]

    def multiplier(self, t: int) -> float:
        base = 1.0 if self.base is None else self.base.multiplier(t)
        return float(self.model.time_multiplier(self.clock.now(t, self._unit), self._d, base))  # type: ignore[attr-defined]

    def multipliers(self, ts: np.ndarray) -> np.ndarray:
        base = 1.0 if self.base is None else multipliers_of(self.base, ts)
        return self.model.multipliers(self._now(ts), self._d) * base

    def marks(self) -> list[Mark]:
        base = [Mark(f"base {m.label}", m.batch) for m in self.base.marks()] if self.base is not None else []
        return [*super().marks(), *base]


class ComposerPreview:
    """Any other scheduler: built through llm-foundry's registry, called on a real Composer ``State``."""

    def __init__(self, block: Mapping[str, Any], clock: RunClock, path: str = "scheduler") -> None:
        import importlib

        import torch
        from composer.core import State
        from composer.devices import DeviceCPU

        from foundry_ext.config.errors import yaml_path

        kwargs = {k: v for k, v in block.items() if k != "name"}
        model = validate_block(block, path)
        if model is not None:  # a class we know: import it alone (llm-foundry's registry imports much more)
            module, _, name = model.adapter.partition(":")
            cls = getattr(importlib.import_module(module), name)
        else:
            from llmfoundry import registry

            cls = registry.schedulers.get(block["name"])
        with yaml_path(path):
            self.scheduler = cls(**kwargs)
        self.model = model
        self.clock = clock
        bpe = clock.batches_per_epoch
        layer = torch.nn.Linear(1, 1)
        self.state = State(
            model=layer,
            rank_zero_seed=0,
            run_name="foundry-ext-preview",
            device=DeviceCPU(),
            max_duration=str(clock.max_duration),
            # State keeps dataloader_len only with a dataloader; a range has the length and costs nothing
            dataloader=range(bpe) if bpe else None,
            dataloader_label="train" if bpe else None,
            dataloader_len=bpe if bpe else -1,
            optimizers=torch.optim.SGD(layer.parameters(), lr=1.0),
        )
        self.warnings: list[Problem] = []
        if model is not None:
            check = run_check(model, clock.max_duration, bpe, 1.0, path)
            self.warnings = check.warnings
            self._check = check

    def multiplier(self, t: int) -> float:
        from composer.core import Timestamp

        spb = self.clock.samples_per_batch or 0
        tpb = self.clock.tokens_per_batch or 0
        bpe = self.clock.batches_per_epoch
        epoch, in_epoch = divmod(t, bpe) if bpe else (0, t)
        self.state.timestamp = Timestamp(
            epoch=epoch,
            batch=t,
            sample=t * spb,
            token=t * tpb,
            batch_in_epoch=in_epoch,
            sample_in_epoch=in_epoch * spb,
            token_in_epoch=in_epoch * tpb,
        )
        return float(self.scheduler(self.state, 1.0))

    def marks(self) -> list[Mark]:
        return [] if self.model is None else _model_marks(self.model, self._check, self.clock)


def build_schedule(block: Mapping[str, Any], clock: RunClock, path: str = "scheduler") -> Schedule:
    """The :class:`Schedule` of a scheduler block, by the cheapest exact route (see the module docstring).

    Raises:
        ConfigError: the block is invalid, or the run makes it fail (the errors the Trainer would raise).
        UnknownBatchesPerEpoch: a duration needs the batches per epoch and the clock does not know them.
    """
    model = validate_block(block, path)
    if model is not None and model.has_formula:
        kinds: dict[str, type[FormulaSchedule]] = {"torch": TorchPreview, "plateau": PlateauPreview}
        return kinds.get(model.kind, FormulaSchedule)(model, clock, path)
    return ComposerPreview(block, clock, path)


@dataclass(frozen=True)
class PlateauCut:
    """A simulated cut: the timestamp of the evaluation (it applies from that 0-indexed batch on) and the cut."""

    batch: int
    cut: Cut


class PlateauTime(Protocol):
    """What a replay of the plateau's cuts reads of a run: the rule, and whether an evaluation fell in the warmup."""

    rule: PlateauRule

    def in_warmup(self, t: int) -> bool: ...


def simulate_plateau(
    schedule: PlateauTime, metrics: Sequence[tuple[int, float]], base_lrs: Sequence[float] = (1.0,)
) -> tuple[list[PlateauCut], int]:
    """Replay ``metrics`` (``(timestamp, value)`` in order) through the scheduler's :class:`PlateauRule`.

    As the adapter does, evaluations in warmup only record the value. ``base_lrs`` are the LRs of the first param
    groups (a plot shows group 0's): with a ``min_lr`` list, group ``g`` is floored at ``min_lr[g]``. The rule is
    per group (each group's scale is cut and floored on its own, as torch does), so the first groups' scales do not
    depend on the others.

    Returns:
        The cuts (``cut.new_scale`` is group 0's scale), and how many evaluations fell in warmup.
    """
    rule = schedule.rule
    if isinstance(rule.min_lr, Sequence) and len(rule.min_lr) > len(base_lrs):
        rule = dataclasses.replace(rule, min_lr=list(rule.min_lr[: len(base_lrs)]))
    plateau = PlateauState()
    cuts: list[PlateauCut] = []
    skipped = 0
    for t, value in metrics:
        if schedule.in_warmup(t):
            plateau.last_value = value
            skipped += 1
            continue
        cut = rule.step(plateau, value, base_lrs)
        if cut is not None:
            cuts.append(PlateauCut(t, cut))
    return cuts, skipped
