"""``inverse_sqrt`` as a ComposerScheduler (the keys and the formula: :mod:`foundry_ext.schedules.inverse_sqrt`)."""

from __future__ import annotations

from foundry_ext.schedulers.base import ModelScheduler
from foundry_ext.schedules.inverse_sqrt import InverseSqrt

__all__ = ["InverseSqrtScheduler"]


class InverseSqrtScheduler(ModelScheduler):
    """``inverse_sqrt``: linear warmup from ``alpha_i``, then ``alpha_f + (1 - alpha_f) / sqrt((t + tau - t_w) / tau)``.

    See :class:`foundry_ext.schedules.inverse_sqrt.InverseSqrt` for the formula and OLMo-core's / Hugging Face's
    equivalents.

    Args:
        t_warmup (str | Time): Warmup length; ``0ba`` needs ``t_timescale``. Required.
        t_timescale (str | Time, optional): Time scale ``tau`` of the decay. Default = ``t_warmup``.
        alpha_i (float): Multiplier at which the warmup starts, in [0, 1]. Default = ``0.0``.
        alpha_f (float): Multiplier the decay tends to, in [0, 1]. Default = ``0.0``.
        scale_warmup (bool): Whether ssr also scales the warmup. Default = ``False``.

    Raises:
        ConfigError: every bad key, one line each (``scheduler.<key>: ...``), when the scheduler is built.
    """

    Config = InverseSqrt
