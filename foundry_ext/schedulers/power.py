"""``power`` as a ComposerScheduler (the keys and the formula: :mod:`foundry_ext.schedules.power`)."""

from __future__ import annotations

from foundry_ext.schedulers.base import ModelScheduler
from foundry_ext.schedules.power import Power

__all__ = ["PowerScheduler"]


class PowerScheduler(ModelScheduler):
    """``power``: a linear warmup, then ``(t / t_warmup)^b``, then a linear tail to ``alpha_f`` ending at ``t_max``.

    Args:
        t_warmup (str | Time): Warmup length, > 0. Required.
        b (float): Exponent of the power law, < 0. Default = ``-0.51``.
        t_decay (str | Time): Length of the linear tail ending at ``t_max``. Default = ``"0.1dur"``.
        t_max (str | Time): When the tail ends. Default = ``"1dur"``.
        alpha_i (float): Multiplier at which the warmup starts, in [0, 1]. Default = ``0.0``.
        alpha_f (float): Multiplier at the end of the tail and after it, in [0, 1]. Default = ``0.0``.
        scale_warmup (bool): Whether ssr also scales the warmup. Default = ``False``.

    Raises:
        ConfigError: every bad key, one line each (``scheduler.<key>: ...``), when the scheduler is built.
    """

    Config = Power
