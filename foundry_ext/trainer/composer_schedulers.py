"""Composer's built-in schedules under llm-foundry names, with validated configs.

Each class subclasses Composer's own and adds validation (:mod:`foundry_ext.schedules.composer`), so the behaviour is
Composer's exactly. Durations are parsed once at build time, which makes each call cheaper than Composer's own
(Composer re-parses a string duration on every call), and the first call runs the checks that need the run
(Composer's own, plus a warning for a warmup longer than the run).

==========================  ==================================================
``scheduler.name``          Composer class
==========================  ==================================================
``step``                    :class:`composer.optim.StepScheduler`
``multistep``               :class:`composer.optim.MultiStepScheduler`
``multistep_with_warmup``   :class:`composer.optim.MultiStepWithWarmupScheduler`
``constant``                :class:`composer.optim.ConstantScheduler`
``linear``                  :class:`composer.optim.LinearScheduler`
``exponential``             :class:`composer.optim.ExponentialScheduler`
``cosine``                  :class:`composer.optim.CosineAnnealingScheduler`
``cosine_with_restarts``    :class:`composer.optim.CosineAnnealingWarmRestartsScheduler`
``polynomial``              :class:`composer.optim.PolynomialScheduler`
``polynomial_with_warmup``  :class:`composer.optim.PolynomialWithWarmupScheduler`
==========================  ==================================================
"""

from __future__ import annotations

from typing import Any

from composer import optim
from composer.core import State

from foundry_ext.config.base import build
from foundry_ext.config.durations import Duration
from foundry_ext.config.errors import current_path
from foundry_ext.schedules.base import ScheduleModel
from foundry_ext.schedules.composer import COMPOSER_MODELS
from foundry_ext.trainer.schedulers import RunResolver

__all__ = [
    "COMPOSER_SCHEDULERS",
    "ConstantScheduler",
    "CosineAnnealingScheduler",
    "CosineAnnealingWarmRestartsScheduler",
    "ExponentialScheduler",
    "LinearScheduler",
    "MultiStepScheduler",
    "MultiStepWithWarmupScheduler",
    "PolynomialScheduler",
    "PolynomialWithWarmupScheduler",
    "StepScheduler",
]


def _composer_value(value: Any) -> Any:
    if isinstance(value, Duration):
        return value.to_time()
    if isinstance(value, list):
        return [_composer_value(v) for v in value]
    return value


def _wrap(base: type, model: type[ScheduleModel]) -> type:
    """Subclass a Composer scheduler: validate the keys with ``model``, check the run at the first call."""

    def __init__(self: Any, **kwargs: Any) -> None:
        self.path = current_path()
        self.config = build(model, kwargs, self.path)
        self.resolve = RunResolver(self.config, self.path)
        base.__init__(self, **{k: _composer_value(getattr(self.config, k)) for k in type(self.config).model_fields})

    def __call__(self: Any, state: State, ssr: float = 1.0) -> float:
        self.resolve(state, ssr)  # memoised: the run checks and warnings, once per run
        return base.__call__(self, state, ssr)

    return type(
        base.__name__,
        (base,),
        {
            "__module__": __name__,
            "__qualname__": base.__name__,
            "__doc__": f"Composer's :class:`~composer.optim.{base.__name__}`, as ``scheduler.name: {model.name}``.\n\n"
            + (base.__doc__ or ""),
            "__init__": __init__,
            "__call__": __call__,
            "Config": model,
        },
    )


StepScheduler = _wrap(optim.StepScheduler, COMPOSER_MODELS["step"])
MultiStepScheduler = _wrap(optim.MultiStepScheduler, COMPOSER_MODELS["multistep"])
MultiStepWithWarmupScheduler = _wrap(optim.MultiStepWithWarmupScheduler, COMPOSER_MODELS["multistep_with_warmup"])
ConstantScheduler = _wrap(optim.ConstantScheduler, COMPOSER_MODELS["constant"])
LinearScheduler = _wrap(optim.LinearScheduler, COMPOSER_MODELS["linear"])
ExponentialScheduler = _wrap(optim.ExponentialScheduler, COMPOSER_MODELS["exponential"])
CosineAnnealingScheduler = _wrap(optim.CosineAnnealingScheduler, COMPOSER_MODELS["cosine"])
CosineAnnealingWarmRestartsScheduler = _wrap(
    optim.CosineAnnealingWarmRestartsScheduler, COMPOSER_MODELS["cosine_with_restarts"]
)
PolynomialScheduler = _wrap(optim.PolynomialScheduler, COMPOSER_MODELS["polynomial"])
PolynomialWithWarmupScheduler = _wrap(optim.PolynomialWithWarmupScheduler, COMPOSER_MODELS["polynomial_with_warmup"])

#: ``scheduler.name`` -> (our class, Composer's class).
COMPOSER_SCHEDULERS: dict[str, tuple[type, type]] = {
    name: (cls, cls.__mro__[1])
    for name, cls in {
        "step": StepScheduler,
        "multistep": MultiStepScheduler,
        "multistep_with_warmup": MultiStepWithWarmupScheduler,
        "constant": ConstantScheduler,
        "linear": LinearScheduler,
        "exponential": ExponentialScheduler,
        "cosine": CosineAnnealingScheduler,
        "cosine_with_restarts": CosineAnnealingWarmRestartsScheduler,
        "polynomial": PolynomialScheduler,
        "polynomial_with_warmup": PolynomialWithWarmupScheduler,
    }.items()
}
