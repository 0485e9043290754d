"""``reduce_lr_on_plateau``: a stateless multiplier whose scale lives in :class:`ReduceLROnPlateauCallback`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import catalogue
from composer.core import State, Time
from composer.optim import ComposerScheduler

from foundry_ext._config import (
    ConfigError,
    ValidatedMeta,
    check_keys,
    choice,
    did_you_mean,
    duration,
    field_prefix,
    flag,
    integer,
    number,
)
from foundry_ext._time import now, resolve
from foundry_ext.plateau.callback import ReduceLROnPlateauCallback
from foundry_ext.plateau.rule import PlateauRule

__all__ = ["DEFAULT_MONITOR", "ReduceLROnPlateauScheduler"]

DEFAULT_MONITOR = "metrics/eval/LanguageCrossEntropy"


def _monitor(field: str, value: Any) -> str:
    if not isinstance(value, str) or not (
        (value.startswith("metrics/") and value.count("/") >= 2) or value.startswith("loss/train/")
    ):
        raise ConfigError(
            field,
            f"{value!r} is not a metric name Composer logs; expected 'metrics/<evaluator label>/<metric>' "
            f"(e.g. {DEFAULT_MONITOR}) or a train loss such as 'loss/train/total'",
        )
    return value


def _min_lr(field: str, value: Any) -> float | list[float]:
    check = number(lo=0.0)
    if isinstance(value, (list, tuple)):
        return [check(f"{field}[{i}]", v) for i, v in enumerate(value)]
    return check(field, value)


def _base(field: str, value: Any) -> ComposerScheduler | None:
    """Build the ``base`` scheduler from its YAML block through llm-foundry's registry (ours included)."""
    if value is None or (callable(value) and not isinstance(value, Mapping)):
        return value
    if not isinstance(value, Mapping) or "name" not in value:
        raise ConfigError(field, f"{value!r} is not a scheduler block; expected e.g. {{name: warmup_stable_decay}}")
    from llmfoundry import registry  # slow import: only when a base is configured

    config = dict(value)
    name = config.pop("name")
    if name == "reduce_lr_on_plateau":
        raise ConfigError(f"{field}.name", "reduce_lr_on_plateau cannot be its own base; pick a time-based schedule")
    try:
        cls = registry.schedulers.get(name)
    except catalogue.RegistryError:
        names = sorted(registry.schedulers.get_all())
        raise ConfigError(
            f"{field}.name",
            f"{name!r} is not a registered scheduler{did_you_mean(str(name), names)}; available: {', '.join(names)}",
        ) from None
    with field_prefix(field):
        check_keys(cls, config, field)  # llm-foundry's own schedulers do not validate their keys
        return cls(**config)


class ReduceLROnPlateauScheduler(ComposerScheduler, metaclass=ValidatedMeta):
    r"""Multiply the LR by ``factor`` when a monitored metric stops improving, the way torch's ReduceLROnPlateau does.

    .. math::
        \alpha(t) = \alpha_{base}(t) \cdot \min(1, t / t_w) \cdot s

    where :math:`\alpha_{base}` is the optional ``base`` schedule (1 when none), :math:`t_w` = ``t_warmup`` and
    :math:`s` the plateau scale, which starts at 1 and is multiplied by ``factor`` at each cut. The scale is held by a
    :class:`ReduceLROnPlateauCallback` (the adapter): it reads the monitored value after each evaluation
    (``Event.EVAL_AFTER_ALL``), or every ``check_interval`` for a train loss, applies :class:`PlateauRule` (torch's
    arithmetic), and saves its state in the checkpoint. This scheduler attaches the adapter to the Trainer the first
    time it is called, unless one is already in ``callbacks``; then it uses that one.

    Evaluations before ``t_warmup`` is over are logged but do not count (the plateau logic starts after warmup).

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

    _yaml_prefix = "scheduler"
    _fields: dict[str, Any] = {  # noqa: RUF012 - read by ValidatedMeta
        "monitor": _monitor,
        "mode": choice("min", "max"),
        "factor": number(lo=0.0, hi=1.0, lo_open=True, hi_open=True),
        "patience": integer(lo=0),
        "threshold": number(lo=0.0),
        "threshold_mode": choice("rel", "abs"),
        "cooldown": integer(lo=0),
        "min_lr": _min_lr,
        "min_scale": number(lo=0.0, hi=1.0),
        "eps": number(lo=0.0),
        "t_warmup": duration(),
        "scale_warmup": flag,
        "check_interval": lambda f, v: None if v is None else duration(allow_zero=False)(f, v),
        "base": _base,
    }

    def __init__(
        self,
        monitor: str = DEFAULT_MONITOR,
        mode: str = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: str = "rel",
        cooldown: int = 0,
        min_lr: float | Sequence[float] = 0.0,
        min_scale: float = 0.0,
        eps: float = 1e-8,
        t_warmup: str | Time = "0ba",
        scale_warmup: bool = False,
        check_interval: str | Time | None = None,
        base: Mapping[str, Any] | ComposerScheduler | None = None,
    ) -> None:
        self.monitor = monitor
        self.train_monitor = monitor.startswith("loss/train/")
        if self.train_monitor and check_interval is None:
            raise ConfigError(
                "scheduler.check_interval",
                f"is required when monitor is a train loss ({monitor!r}); e.g. check_interval: 100ba",
            )
        if not self.train_monitor and check_interval is not None:
            raise ConfigError(
                "scheduler.check_interval",
                f"{check_interval!r}: eval metrics are checked at every evaluation (set eval_interval instead); "
                "check_interval only applies to loss/train/... monitors",
            )
        self.rule = PlateauRule(
            mode=mode,
            factor=factor,
            patience=patience,
            threshold=threshold,
            threshold_mode=threshold_mode,
            cooldown=cooldown,
            min_lr=min_lr,
            min_scale=min_scale,
            eps=eps,
        )
        self.t_warmup = t_warmup
        self.scale_warmup = scale_warmup
        self.check_interval = check_interval
        self.base = base
        self.callback = ReduceLROnPlateauCallback()
        self.callback.bind(self)
        self._state_id: int | None = None
        self._cache: dict = {}
        self._check_cache: dict = {}
        self.last_ssr = 1.0

    def is_check_time(self, state: State) -> bool:
        """For a train-loss monitor: whether the batch that just ended closes a ``check_interval``."""
        assert self.check_interval is not None
        resolved = resolve({"check_interval": self.check_interval}, {}, state, 1.0, self._check_cache)
        interval = resolved.values["check_interval"]
        return interval > 0 and now(state, resolved.unit) % interval == 0

    def in_warmup(self, state: State, ssr: float = 1.0) -> bool:
        resolved = resolve({"t_warmup": self.t_warmup}, {"t_warmup": self.scale_warmup}, state, ssr, self._cache)
        return now(state, resolved.unit) < resolved.values["t_warmup"]

    def time_multiplier(self, state: State, ssr: float = 1.0) -> float:
        """Everything but the plateau scale: ``base(t) * min(1, t / t_warmup)``."""
        resolved = resolve({"t_warmup": self.t_warmup}, {"t_warmup": self.scale_warmup}, state, ssr, self._cache)
        t_warmup = resolved.values["t_warmup"]
        t = now(state, resolved.unit)
        value = t / t_warmup if t < t_warmup else 1.0
        if self.base is not None:
            value *= self.base(state, ssr)
        return value

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        self.last_ssr = ssr
        if self._state_id != id(state):  # first call on this Trainer (its LambdaLR is being built): attach
            self.callback = ReduceLROnPlateauCallback.attach(self, state)
            self._state_id = id(state)
        return self.time_multiplier(state, ssr) * self.callback.plateau.scale
