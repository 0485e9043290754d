"""``reduce_lr_on_plateau``'s Composer scheduler: the configuration, and the schedule times the plateau scale.

Stateless: the scale lives in :class:`~foundry_ext.trainer.plateau.callback.ReduceLROnPlateauCallback`, which this
scheduler attaches to the Trainer at its first call.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from composer.core import State

from foundry_ext.config.durations import convert, max_duration_of, now
from foundry_ext.config.errors import ConfigError
from foundry_ext.schedules.plateau import ReduceLROnPlateau
from foundry_ext.trainer.plateau.base import build_base
from foundry_ext.trainer.plateau.callback import ReduceLROnPlateauCallback
from foundry_ext.trainer.schedulers import ModelScheduler

__all__ = ["ReduceLROnPlateauScheduler"]


class ReduceLROnPlateauScheduler(ModelScheduler):
    """``reduce_lr_on_plateau``: the LR is multiplied by ``factor`` when a monitored metric stops improving.

    The adapter reads the monitored value after each evaluation (the monitored evaluator's ``Event.EVAL_END``), or
    every ``check_interval`` for a train loss, applies :class:`PlateauRule` (torch's arithmetic), and saves its state in
    the checkpoint. This scheduler attaches the adapter to the Trainer the first time it is called, unless one is
    already in ``callbacks``; then it uses that one. Evaluations before ``t_warmup`` is over are logged but do not
    count.

    Args:
        monitor (str): Logged metric name. Default = ``"metrics/eval/LanguageCrossEntropy"``.
        mode (str): ``min`` or ``max``. Default = ``"min"``.
        factor (float): Cut factor in (0, 1): ``s <- s * factor``. Default = ``0.1`` (torch's).
        patience (int): Evaluations with no improvement tolerated before a cut. Default = ``10``.
        threshold (float): Minimum change that counts as improvement. Default = ``1e-4``.
        threshold_mode (str): ``rel`` or ``abs``. Default = ``"rel"``.
        cooldown (int): Evaluations to wait after a cut before counting again. Default = ``0``.
        min_lr (float | list[float]): Absolute LR floor, per param group if a list. Default = ``0.0``.
        min_scale (float): Floor of the scale, as a fraction of the base LR. Default = ``0.0``.
        eps (float): Cuts that change the LR by less than this are skipped. Default = ``1e-8``.
        t_warmup (str | Time): Linear warmup before the plateau logic applies. Default = ``"0ba"``.
        scale_warmup (bool): Whether ``scale_schedule_ratio`` scales ``t_warmup``. Default = ``False``.
        check_interval (str | Time, optional): How often a train-loss monitor is checked (mean of the synced
            ``loss/train/*`` values since the last check). Required for ``loss/train/...`` monitors, not allowed for
            eval metrics (those are checked at every evaluation). Default = ``None``.
        base (dict | ComposerScheduler, optional): Another schedule multiplied in, as a YAML block
            (``{name: warmup_stable_decay, ...}``) or a scheduler object. Default = ``None``.
    """

    Config = ReduceLROnPlateau

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        config = self.config
        self.train_monitor = config.train_monitor
        self.rule = config.rule()
        base = config.base
        self.base = build_base(base, f"{self.path}.base") if isinstance(base, Mapping) else base
        # Composer's rule (compile_composer_scheduler): a scheduler whose signature has one parameter takes no ssr
        self._base_takes_ssr = self.base is None or len(inspect.signature(self.base).parameters) != 1
        self.callback = ReduceLROnPlateauCallback()
        self.callback.bind(self)
        self._state_id: int | None = None
        self.last_ssr = 1.0

    def is_check_time(self, state: State) -> bool:
        """For a train-loss monitor: whether the batch that just ended closes a ``check_interval``."""
        assert self.config.check_interval is not None
        interval = convert(self.config.check_interval, max_duration_of(state), state.dataloader_len)
        return interval.value > 0 and now(state, interval.unit) % interval.value == 0

    def in_warmup(self, state: State, ssr: float = 1.0) -> bool:
        """Whether ``state`` is before the end of ``t_warmup`` (evaluations there do not count)."""
        d = self.resolve(state, ssr)
        return now(state, d.unit) < d.values["t_warmup"]

    def time_multiplier(self, state: State, ssr: float = 1.0) -> float:
        """Everything but the plateau scale: ``base(t) * min(1, t / t_warmup)``."""
        d = self.resolve(state, ssr)
        base = 1.0 if self.base is None else self._base(state, ssr)
        return self.config.time_multiplier(now(state, d.unit), d.values, base)

    def _base(self, state: State, ssr: float) -> float:
        if self._base_takes_ssr:
            return self.base(state, ssr)
        if ssr != 1.0:
            raise ConfigError(
                f"{self.path}.base",
                f"{self.base!r} takes only (state), so it cannot follow scale_schedule_ratio={ssr}; give a base "
                "scheduler that takes (state, ssr), or train with scale_schedule_ratio: 1.0",
            )
        return self.base(state)

    def group_multiplier(self, state: State, ssr: float, group: int) -> float:
        """The multiplier of param group ``group``: ``time_multiplier(t) * s_group``."""
        return self.time_multiplier(state, ssr) * self.callback.plateau.scale_of(group)

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        """The multiplier of param group 0 (of every group while they share one scale).

        With several param groups the adapter gives Composer's ``LambdaLR`` one function per group
        (:meth:`group_multiplier`) at ``Event.FIT_START``, so that each group can stop at its own ``min_lr``.
        """
        self.last_ssr = ssr
        if self._state_id != id(state):  # first call on this Trainer (its LambdaLR is being built): attach
            self.callback = ReduceLROnPlateauCallback.attach(self, state)
            self._check_param_groups(state)
            self._state_id = id(state)
        return self.time_multiplier(state, ssr) * self.callback.plateau.scale

    def _check_param_groups(self, state: State) -> None:
        """A ``min_lr`` list must have one value per param group: checked while the Trainer is built."""
        min_lr = self.config.min_lr
        if not state.optimizers or not isinstance(min_lr, list):
            return
        groups = len(state.optimizers[0].param_groups)
        if len(min_lr) != groups:
            raise ConfigError(
                f"{self.path}.min_lr",
                f"{min_lr!r} has {len(min_lr)} values but the optimizer has {groups} param group"
                f"{'s' if groups != 1 else ''}; give one number for all groups, or exactly one per param group",
            )
