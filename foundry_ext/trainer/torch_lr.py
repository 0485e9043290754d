"""``torch_lr_scheduler``: any :mod:`torch.optim.lr_scheduler` class by name, as a pure Composer scheduler.

``scheduler: {name: torch_lr_scheduler, type: StepLR, step_size: 1000, gamma: 0.5}`` runs torch's own ``StepLR``: the
multiplier at batch ``t`` is the LR that torch's scheduler gives after ``t`` calls of ``.step()`` on an optimizer whose
LR is 1.0 (:mod:`foundry_ext.trainer.torch_engine`). The arguments are validated per class by
:mod:`foundry_ext.schedules.torch` before torch sees them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from composer.core import State

from foundry_ext.catalog.batch_size import check_batch_size_schedule
from foundry_ext.catalog.registry import validate_block
from foundry_ext.config.durations import Duration, timestamp_of_batch
from foundry_ext.config.errors import ConfigError, stop_run
from foundry_ext.config.train_yaml import max_duration, run_clock
from foundry_ext.schedules.base import run_check
from foundry_ext.schedules.batch_size import in_ramp_batches
from foundry_ext.schedules.run_lr import stepped_lr_problem
from foundry_ext.schedules.torch import REFUSED, TORCH_MODELS, TorchLR
from foundry_ext.trainer.schedulers import ModelScheduler
from foundry_ext.trainer.torch_engine import TorchSchedule

__all__ = ["SUPPORTED_TYPES", "TorchLRScheduler", "torch_run_transform", "torch_step"]

#: The torch classes ``type`` may name.
SUPPORTED_TYPES: tuple[str, ...] = tuple(sorted(TORCH_MODELS))
assert not set(SUPPORTED_TYPES) & set(REFUSED)


def torch_step(batch: int, ssr: float) -> int:
    """The torch step of a batch: ``floor(batch / ssr)`` (the tolerance keeps e.g. 7 / 0.1 at 70 steps, not 69)."""
    return batch if ssr == 1.0 else int(batch / ssr + 1e-9)


class TorchLRScheduler(ModelScheduler):
    """``torch_lr_scheduler``: a :mod:`torch.optim.lr_scheduler` class by name, stepped once per batch.

    The torch scheduler is kept privately and advanced from where it was last asked (one ``.step()`` per batch); a
    backwards or far jump rebuilds it and uses torch's closed form or replays its per-step arithmetic on a float, so
    the multiplier is a pure function of the batch count and resume is exact (``docs/torch_lr_scheduler.md``).

    LRs that torch treats as absolute (``OneCycleLR.max_lr``, ``CyclicLR.base_lr``/``max_lr``) are multipliers of
    the optimizer's LR here. Momentum cycling (``cycle_momentum``) acts on the private optimizer only.

    Args:
        type (str): The torch class name, e.g. ``"StepLR"``. ``ReduceLROnPlateau``, ``LambdaLR`` and
            ``MultiplicativeLR`` are refused (they need a metric or a Python callable).
        **kwargs: The torch class's own keyword arguments, except ``optimizer`` and ``last_epoch``.

    Raises:
        ConfigError: every bad argument, one line each, naming it (``scheduler.schedulers[1].T_max: ...``).
    """

    Config = TorchLR

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.kwargs = {k: v for k, v in kwargs.items() if k != "type"}
        try:
            self.engine = TorchSchedule(self.config.type, self.config.torch_kwargs())
        except (ValueError, TypeError, ZeroDivisionError, KeyError) as err:  # the models should make this unreachable
            raise ConfigError(
                self.path, f"torch.optim.lr_scheduler.{self.config.type} rejected the arguments: {err}"
            ) from None
        # the whole run's LR is checked at the first resolution
        self.resolve.batch_multiplier = _trains_with(self.engine)

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        self.resolve(state, ssr)  # the run checks, once (e.g. OneCycleLR.total_steps against max_duration)
        t = torch_step(state.timestamp.batch.value, ssr)
        if t > self.engine.total_steps:
            raise ConfigError(
                f"{self.path}.total_steps",
                f"OneCycleLR is defined for {self.engine.total_steps} steps but batch {state.timestamp.batch.value} "
                f"was reached (ssr={ssr}); set total_steps (or epochs * steps_per_epoch) to at least max_duration in "
                "batches",
            )
        return self.engine.at(t)


def torch_run_transform(cfg: dict[str, Any]) -> dict[str, Any]:
    """llm-foundry config transform: a ``torch_lr_scheduler``'s LR over the whole run, before anything is built.

    The pre-flight transform (:mod:`foundry_ext.catalog.preflight`) sweeps every other scheduler from the YAML; torch's
    classes need torch's own arithmetic (:mod:`foundry_ext.trainer.torch_engine`), so their sweep is this transform,
    registered beside it. A run with a ``batch_size_schedule`` is swept over the ramp's batches, and its run checks
    (``OneCycleLR.total_steps``) made on them, which the Trainer cannot do from a ``max_duration`` in tokens. A block
    the pre-flight check refuses, or a run whose length the YAML does not tell, is left to it and to the Trainer's
    first call. The config is returned unchanged.
    """
    block = cfg.get("scheduler")
    if not isinstance(block, Mapping) or block.get("name") != "torch_lr_scheduler":
        return cfg
    try:
        model = validate_block(dict(block), "scheduler")
        world = int(os.environ.get("WORLD_SIZE", "1") or 1)
        ramp = _ramp_batches(cfg, world)
        total = run_clock(cfg, world_size=world).total_batches if ramp is None else ramp
        engine = TorchSchedule(model.type, model.torch_kwargs())  # type: ignore[union-attr]
    except Exception:  # reported by the pre-flight transform, or checked when the Trainer knows the run
        return cfg
    if ramp is not None:
        # the Trainer's own check cannot count a ramped run's steps from a max_duration in tok/sp: made here, on the
        # ramp's batches (e.g. OneCycleLR.total_steps), as the preview makes it (foundry_ext.preview.batch_size)
        errors = run_check(model, Duration(ramp, "ba"), None, 1.0, "scheduler").errors  # type: ignore[arg-type]
        if errors:
            stop_run(in_ramp_batches(errors, max_duration(cfg), ramp))
    problem = stepped_lr_problem(model, _trains_with(engine), total)  # type: ignore[arg-type]
    if problem is not None:
        stop_run([problem])
    return cfg


def _ramp_batches(cfg: Mapping[str, Any], world_size: int) -> int | None:
    """The batches (torch steps) of a run with a ``batch_size_schedule``; None without one (or with a bad one).

    A ramped run of ``max_duration: 32768tok`` from 8 to 32 samples of 128 tokens takes 13 steps, not the 32 of a
    fixed batch of 8: a ``OneCycleLR`` sized for the 13 would otherwise be refused as leaving its ``total_steps``.
    """
    plan, problems, _ = check_batch_size_schedule(cfg, world_size)
    if plan is None or problems:
        return None  # no ramp, or one its own transform refuses
    return plan.step_count(max_duration(cfg), int(cfg["max_seq_len"]))


def _trains_with(engine: TorchSchedule) -> Callable[[int], float]:
    """``batch -> multiplier`` that 0-indexed ``batch`` trains with: torch's step at the batch's timestamp."""
    return lambda batch: engine.at(timestamp_of_batch(batch))
