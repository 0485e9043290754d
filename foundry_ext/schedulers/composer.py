"""Composer's built-in schedules under llm-foundry names, with validated configs.

Each class subclasses Composer's own and adds nothing but validation, so the behaviour is Composer's exactly.
Validation also parses time strings once, at build time, which makes each call cheaper than Composer's own
(Composer re-parses a string duration on every call).

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

from foundry_ext._config import ConfigError, ValidatedMeta, duration, flag, number

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


def _milestones(field: str, value: Any) -> list:
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(field, f"{value!r} is not a list of durations; expected e.g. ['1000ba', '2000ba']")
    check = duration()
    return [check(f"{field}[{i}]", v) for i, v in enumerate(value)]


_FIELDS: dict[str, Any] = {
    "t_warmup": duration(),
    "t_max": duration(allow_zero=False),
    "t_0": duration(allow_zero=False),
    "step_size": duration(allow_zero=False),
    "decay_period": duration(allow_zero=False),
    "milestones": _milestones,
    "gamma": number(lo=0.0, lo_open=True),
    "alpha": number(lo=0.0),
    "alpha_i": number(lo=0.0),
    "alpha_f": number(lo=0.0),
    "power": number(lo=0.0, lo_open=True),
    "t_mult": number(lo=1.0),
    "scale_warmup": flag,
}


def _wrap(base: type, name: str) -> type:
    """Subclass a Composer scheduler, adding config validation and nothing else."""
    cls = ValidatedMeta(
        base.__name__,
        (base,),
        {
            "__module__": __name__,
            "__qualname__": base.__name__,
            "__doc__": f"Composer's :class:`~composer.optim.{base.__name__}`, as ``scheduler.name: {name}``.\n\n"
            + (base.__doc__ or ""),
            "_yaml_prefix": "scheduler",
            "_fields": _FIELDS,
        },
    )
    return cls


StepScheduler = _wrap(optim.StepScheduler, "step")
MultiStepScheduler = _wrap(optim.MultiStepScheduler, "multistep")
MultiStepWithWarmupScheduler = _wrap(optim.MultiStepWithWarmupScheduler, "multistep_with_warmup")
ConstantScheduler = _wrap(optim.ConstantScheduler, "constant")
LinearScheduler = _wrap(optim.LinearScheduler, "linear")
ExponentialScheduler = _wrap(optim.ExponentialScheduler, "exponential")
CosineAnnealingScheduler = _wrap(optim.CosineAnnealingScheduler, "cosine")
CosineAnnealingWarmRestartsScheduler = _wrap(optim.CosineAnnealingWarmRestartsScheduler, "cosine_with_restarts")
PolynomialScheduler = _wrap(optim.PolynomialScheduler, "polynomial")
PolynomialWithWarmupScheduler = _wrap(optim.PolynomialWithWarmupScheduler, "polynomial_with_warmup")

#: ``scheduler.name`` -> (our class, Composer's class).
COMPOSER_SCHEDULERS: dict[str, tuple[type, type]] = {
    "step": (StepScheduler, optim.StepScheduler),
    "multistep": (MultiStepScheduler, optim.MultiStepScheduler),
    "multistep_with_warmup": (MultiStepWithWarmupScheduler, optim.MultiStepWithWarmupScheduler),
    "constant": (ConstantScheduler, optim.ConstantScheduler),
    "linear": (LinearScheduler, optim.LinearScheduler),
    "exponential": (ExponentialScheduler, optim.ExponentialScheduler),
    "cosine": (CosineAnnealingScheduler, optim.CosineAnnealingScheduler),
    "cosine_with_restarts": (CosineAnnealingWarmRestartsScheduler, optim.CosineAnnealingWarmRestartsScheduler),
    "polynomial": (PolynomialScheduler, optim.PolynomialScheduler),
    "polynomial_with_warmup": (PolynomialWithWarmupScheduler, optim.PolynomialWithWarmupScheduler),
}
