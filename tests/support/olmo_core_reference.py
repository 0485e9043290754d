"""OLMo-core's schedulers, transcribed: the reference the parity tests compare against.

OLMo-core (``ai2-olmo-core``) cannot be installed next to this stack: it requires torch >= 2.10, this stack pins
torch 2.7. So its ``get_lr`` code is copied here, from ``src/olmo_core/optim/scheduler.py`` of
https://github.com/allenai/OLMo-core at commit fa6c5014c9f6e9ee789da2d9c20d5126fee8df0d (the formulas are the same
in the PyPI release ai2-olmo-core 3.0.0). Only the config plumbing is dropped (``Config``/``Registrable`` bases, the
deprecated ``*_steps`` aliases, the ``t_max``-ignored warnings, the tensor branches): every line that computes an LR
is OLMo-core's, in its order, so that a float difference would show. ``__post_init__`` checks are kept where a test
relies on them. ``scripts/check_olmo_core_reference.py`` checks this file against the released wheel, bit for bit.

:func:`olmo_core_batch_lrs` is OLMo-core's training loop for the LR (``src/olmo_core/train/trainer.py``
``Trainer._fit_epoch``: ``self.global_step += 1`` before the batch trains, then
``TransformerTrainModule.optim_step`` calls ``scheduler.set_lr(group, trainer)`` with ``trainer.global_step``, and
``optim.step()``): 0-indexed batch k trains with ``get_lr(initial_lr, k + 1, max_steps)``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import cos, pi, sqrt

import numpy as np


class OLMoConfigurationError(Exception):
    pass


def _linear_warmup(initial_lr: float, current: int, warmup: int, warmup_min_lr: float = 0.0) -> float:
    if isinstance(initial_lr, float):  # not worth the potential host-device sync if it's a tensor
        assert 0 <= warmup_min_lr < initial_lr
    return warmup_min_lr + (initial_lr - warmup_min_lr) * min(current, warmup) / warmup


def _linear_decay(initial_lr: float, step_from_end: int, decay: int, decay_min_lr: float = 0.0) -> float:
    if isinstance(initial_lr, float):  # not worth the potential host-device sync if it's a tensor
        assert 0 <= decay_min_lr < initial_lr

    return decay_min_lr + (initial_lr - decay_min_lr) * min(step_from_end, decay) / decay


@dataclass
class WSD:
    warmup: int | None = None
    warmup_fraction: float | None = None
    decay: int | None = None
    decay_fraction: float | None = 0.1
    warmup_min_lr: float = 0.0
    decay_min_lr: float = 0.0

    def get_lr(self, initial_lr: float, current: int, t_max: int) -> float:
        if self.warmup is None:
            assert self.warmup_fraction is not None
            warmup = round(t_max * self.warmup_fraction)
        else:
            warmup = self.warmup

        if current <= warmup:
            return _linear_warmup(initial_lr, current, warmup, self.warmup_min_lr)

        if self.decay is None:
            assert self.decay_fraction is not None
            decay = round(t_max * self.decay_fraction)
        else:
            decay = self.decay

        if current >= t_max - decay:
            return _linear_decay(initial_lr, t_max - current, decay, self.decay_min_lr)

        return initial_lr


@dataclass
class PowerLR:
    b: float = -0.51
    warmup: int | None = None
    warmup_fraction: float | None = None
    warmup_min_lr: float = 0.0
    decay: int | None = None
    decay_fraction: float | None = 0.1
    decay_min_lr: float = 0.0

    def __post_init__(self) -> None:
        if (self.warmup_fraction is None) == (self.warmup is None):
            raise OLMoConfigurationError("Either 'warmup_fraction' or 'warmup' must be specified.")
        if (self.decay_fraction is None) == (self.decay is None):
            raise OLMoConfigurationError("Either 'decay_fraction' or 'decay' must be specified. Never both.")
        if self.b >= 0:
            raise OLMoConfigurationError("'b' must be negative for a decaying power‑law.")

    def get_lr(self, initial_lr: float, current: int, t_max: int) -> float:
        if self.warmup is not None:
            warmup = self.warmup
        else:
            assert self.warmup_fraction is not None
            warmup = round(t_max * self.warmup_fraction)
        if self.decay is not None:
            decay = self.decay
        else:
            assert self.decay_fraction is not None
            decay = round(t_max * self.decay_fraction)

        if current <= warmup:
            return _linear_warmup(initial_lr, current, warmup, self.warmup_min_lr)

        if current >= t_max - decay:
            lr_start_tail = initial_lr * ((t_max - decay) / warmup) ** self.b
            return _linear_decay(lr_start_tail, t_max - current, decay, self.decay_min_lr)

        lr = initial_lr * (current / warmup) ** self.b
        return lr


@dataclass
class InvSqrtWithWarmup:
    alpha_f: float = 0.1
    warmup: int | None = None
    warmup_fraction: float | None = None
    warmup_min_lr: float = 0.0

    def get_lr(self, initial_lr: float, current: int, t_max: int) -> float:
        if self.warmup is None:
            assert self.warmup_fraction is not None
            warmup = round(t_max * self.warmup_fraction)
        else:
            warmup = self.warmup

        if current < warmup:
            return _linear_warmup(initial_lr, current, warmup, self.warmup_min_lr)

        eta_min = initial_lr * self.alpha_f
        return eta_min + (initial_lr - eta_min) * sqrt(warmup / current)


def _interpolate_lr(shape: str, start_lr: float, end_lr: float, current: int, duration: int) -> float:
    if shape == "linear":
        return start_lr + (end_lr - start_lr) * current / duration
    elif shape == "cosine":
        return end_lr + (start_lr - end_lr) * (1 + cos(pi * current / duration)) / 2
    else:
        raise NotImplementedError(shape)


def _resolve_lr_from_initial(initial_lr: float, value: float | None, fraction: float | None) -> float:
    if value is not None:
        return value
    assert fraction is not None
    return initial_lr * fraction


@dataclass
class ComposableSchedulerStage:
    duration: int
    shape: str = "linear"
    start_lr: float | None = None
    start_lr_fraction: float | None = None
    end_lr: float | None = None
    end_lr_fraction: float | None = None


@dataclass
class OverrideDecay:
    start: int
    duration: int
    shape: str = "linear"
    end_lr: float | None = None
    end_lr_fraction: float | None = None


@dataclass
class ComposableScheduler:
    stages: list[ComposableSchedulerStage] = field(default_factory=list)
    override_decay: OverrideDecay | None = None

    def _resolve_stage_start(self, stage: ComposableSchedulerStage, initial_lr: float, previous_end_lr: float) -> float:
        if stage.start_lr is None and stage.start_lr_fraction is None:
            return previous_end_lr
        return _resolve_lr_from_initial(initial_lr, stage.start_lr, stage.start_lr_fraction)

    def _main_schedule_lr(self, initial_lr: float, current: int) -> float:
        current = max(current, 0)
        stage_start = 0
        previous_end_lr = initial_lr
        for stage in self.stages:
            start_lr = self._resolve_stage_start(stage, initial_lr, previous_end_lr)
            end_lr = _resolve_lr_from_initial(initial_lr, stage.end_lr, stage.end_lr_fraction)

            stage_end = stage_start + stage.duration
            if current < stage_end:
                stage_current = current - stage_start
                return _interpolate_lr(
                    shape=stage.shape, start_lr=start_lr, end_lr=end_lr, current=stage_current, duration=stage.duration
                )

            previous_end_lr = end_lr
            stage_start = stage_end

        return previous_end_lr

    def get_lr(self, initial_lr: float, current: int, t_max: int) -> float:
        del t_max
        current = max(current, 0)

        if self.override_decay is None or current < self.override_decay.start:
            return self._main_schedule_lr(initial_lr, current)

        override_decay = self.override_decay
        override_start_lr = self._main_schedule_lr(initial_lr, override_decay.start)
        override_end_lr = _resolve_lr_from_initial(initial_lr, override_decay.end_lr, override_decay.end_lr_fraction)
        override_current = current - override_decay.start

        if override_current < override_decay.duration:
            return _interpolate_lr(
                shape=override_decay.shape,
                start_lr=override_start_lr,
                end_lr=override_end_lr,
                current=override_current,
                duration=override_decay.duration,
            )

        return override_end_lr


@dataclass
class WSDS:
    period_lengths: list[int] = field(default_factory=list)
    period_lr_multipliers: list[float] | None = None
    warmup: int | None = None
    warmup_fraction: float | None = None
    decay: int | None = None
    decay_fraction: float | None = None
    warmup_min_lr: float = 0.0
    decay_min_lr: float = 0.0

    _cum_period_end: list[int] = field(default_factory=list, init=False, repr=False)
    _warmup_steps: int = field(default=0, init=False, repr=False)
    _adjusted_period_lengths: list[int] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.period_lengths:
            raise OLMoConfigurationError("'period_lengths' must be provided and non-empty.")
        if (self.warmup is None) == (self.warmup_fraction is None):
            raise OLMoConfigurationError("Exactly one of 'warmup' or 'warmup_fraction' must be specified.")
        if (self.decay is None) == (self.decay_fraction is None):
            raise OLMoConfigurationError("Exactly one of 'decay' or 'decay_fraction' must be specified.")

        L0 = self.period_lengths[0]
        if self.warmup is not None:
            self._warmup_steps = int(self.warmup)
        else:
            assert self.warmup_fraction is not None
            self._warmup_steps = int(round(self.warmup_fraction * L0))  # noqa: RUF046 (OLMo-core's code)

        D0 = self._resolve_decay(L0)
        if self._warmup_steps + D0 > L0:
            raise OLMoConfigurationError(
                f"First period: warmup ({self._warmup_steps}) + decay ({D0}) = "
                f"{self._warmup_steps + D0} exceeds period length ({L0})."
            )
        for i, Li in enumerate(self.period_lengths[1:], start=1):
            Di = self._resolve_decay(Li)
            if Di > Li:
                raise OLMoConfigurationError(f"Period {i}: decay ({Di}) exceeds period length ({Li}).")

        self._adjusted_period_lengths = [L0 - self._warmup_steps, *self.period_lengths[1:]]
        self._cum_period_end = np.cumsum(self._adjusted_period_lengths).tolist()

    def _resolve_decay(self, Li: int) -> int:
        if self.decay is not None:
            return int(self.decay)
        else:
            assert self.decay_fraction is not None
            return int(round(self.decay_fraction * Li))  # noqa: RUF046 (OLMo-core's code)

    def _find_period(self, x: int) -> int:
        for idx, end in enumerate(self._cum_period_end):
            if x <= end:
                return idx
        return len(self._cum_period_end) - 1

    def _get_peak_lr(self, initial_lr: float, pidx: int) -> float:
        if self.period_lr_multipliers is None:
            return initial_lr
        else:
            return initial_lr * self.period_lr_multipliers[pidx]

    def get_lr(self, initial_lr: float, current: int, t_max: int) -> float:
        del t_max
        if current < self._warmup_steps:
            return _linear_warmup(self._get_peak_lr(initial_lr, 0), current, self._warmup_steps, self.warmup_min_lr)

        adjusted_current = current - self._warmup_steps

        if adjusted_current >= self._cum_period_end[-1]:
            return self.decay_min_lr

        pidx = self._find_period(adjusted_current)
        start = 0 if pidx == 0 else self._cum_period_end[pidx - 1]
        Li = self._adjusted_period_lengths[pidx]
        pos = min(max(adjusted_current - start, 0), Li)

        D = self._resolve_decay(self.period_lengths[pidx])
        S = Li - D

        if pos < S:
            return self._get_peak_lr(initial_lr, pidx)
        else:
            t = pos - S
            return _linear_decay(self._get_peak_lr(initial_lr, pidx), D - t, D, self.decay_min_lr)


def olmo_core_batch_lrs(scheduler: object, initial_lr: float, max_steps: int) -> list[float]:
    """The LR each 0-indexed batch of an OLMo-core run of ``max_steps`` steps trains with: ``get_lr(.., k + 1, ..)``.

    OLMo-core's ``Trainer._fit_epoch`` increments ``global_step`` before the batch, and the train module sets the LR
    from ``trainer.global_step`` right before ``optim.step()``; the first batch is step 1, the last ``max_steps``.
    """
    lrs = []
    global_step = 0
    while global_step < max_steps:
        global_step += 1
        lrs.append(scheduler.get_lr(initial_lr, global_step, max_steps))  # type: ignore[attr-defined]
    return lrs
