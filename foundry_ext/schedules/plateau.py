"""``reduce_lr_on_plateau``: the keys of the plateau scheduler (the rule's settings, its warmup, its base)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, field_validator, model_validator

from foundry_ext.config.base import NonNegativeDuration, PositiveDuration, build
from foundry_ext.config.durations import Duration
from foundry_ext.config.errors import ConfigError
from foundry_ext.schedules.base import ScheduleModel
from foundry_ext.schedules.plateau_rule import PlateauRule

if TYPE_CHECKING:
    import numpy as np

__all__ = ["DEFAULT_MONITOR", "RULE_KEYS", "ReduceLROnPlateau"]

DEFAULT_MONITOR = "metrics/eval/LanguageCrossEntropy"
#: The keys that are the settings of :class:`PlateauRule`.
RULE_KEYS = ("mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr", "min_scale", "eps")


class ReduceLROnPlateau(ScheduleModel):
    r"""Multiply the LR by ``factor`` when a monitored metric stops improving, the way torch's ReduceLROnPlateau does.

    .. math::
        \alpha(t) = \alpha_{base}(t) \cdot \min(1, t / t_w) \cdot s

    where :math:`\alpha_{base}` is the optional ``base`` schedule (1 when none), :math:`t_w` = ``t_warmup`` and
    :math:`s` the plateau scale, which starts at 1 and is multiplied by ``factor`` at each cut (torch's rule,
    :class:`foundry_ext.schedules.plateau_rule.PlateauRule`). The scale lives in the callback
    :class:`foundry_ext.trainer.plateau.callback.ReduceLROnPlateauCallback`, which the scheduler attaches to the
    Trainer.
    """

    name = "reduce_lr_on_plateau"
    kind = "plateau"
    summary = "torch's ReduceLROnPlateau as a Composer callback + scheduler, composable with any schedule (base)"
    adapter = "foundry_ext.trainer.plateau.scheduler:ReduceLROnPlateauScheduler"
    warmup_field = "t_warmup"
    has_formula = True

    monitor: str = Field(
        DEFAULT_MONITOR,
        description="the logged metric watched: metrics/<evaluator label>/<metric>, or loss/train/<name>",
    )
    mode: Literal["min", "max"] = Field("min", description="whether lower or higher is better")
    factor: float = Field(0.1, gt=0.0, lt=1.0, description="the scale is multiplied by this at a cut")
    patience: int = Field(10, ge=0, description="evaluations without improvement tolerated; the cut comes at the next")
    threshold: float = Field(1e-4, ge=0.0, description="minimum change that counts as an improvement")
    threshold_mode: Literal["rel", "abs"] = Field("rel", description="threshold relative to best (rel) or absolute")
    cooldown: int = Field(0, ge=0, description="evaluations after a cut during which bad evaluations are not counted")
    min_lr: float | list[float] = Field(0.0, description="absolute LR floor >= 0, or one per param group")
    min_scale: float = Field(0.0, ge=0.0, le=1.0, description="floor of the plateau scale (a fraction of the LR)")
    eps: float = Field(1e-8, ge=0.0, description="a cut that lowers every group's LR by eps or less is skipped")
    t_warmup: NonNegativeDuration = Field(Duration(0, "ba"), description="linear warmup; evaluations in it don't count")
    scale_warmup: bool = Field(False, description="whether scale_schedule_ratio also scales t_warmup")
    check_interval: PositiveDuration | None = Field(
        None, description="train-loss monitors only (required there): how often the mean loss is checked"
    )
    base: Any = Field(
        None,
        description="another schedule multiplied in",
        json_schema_extra={"x-allowed": "a scheduler block {name: ..., ...} of any other scheduler"},
    )

    @field_validator("monitor")
    @classmethod
    def _monitor(cls, value: str) -> str:
        if not ((value.startswith("metrics/") and value.count("/") >= 2) or value.startswith("loss/train/")):
            raise ValueError(
                f"{value!r} is not a metric name Composer logs; expected 'metrics/<evaluator label>/<metric>' "
                f"(e.g. {DEFAULT_MONITOR}) or a train loss such as 'loss/train/total'"
            )
        return value

    @field_validator("min_lr")
    @classmethod
    def _min_lr(cls, value: float | list[float]) -> float | list[float]:
        values = value if isinstance(value, list) else [value]
        if isinstance(value, list) and not value:
            raise ValueError("[] is empty; expected a number >= 0, or one per param group")
        for v in values:
            if v < 0:
                raise ValueError(f"{value!r} is out of range; expected a number >= 0, or a list of them")
        return value

    @field_validator("base", mode="plain")
    @classmethod
    def _base(cls, value: Any) -> Any:
        if value is None or (callable(value) and not isinstance(value, Mapping)):
            return value  # a scheduler object (Python API)
        if not isinstance(value, Mapping) or "name" not in value:
            raise ValueError(f"{value!r} is not a scheduler block; expected e.g. {{name: warmup_stable_decay}}")
        block = dict(value)
        if block["name"] == cls.name:
            raise ConfigError("name", "reduce_lr_on_plateau cannot be its own base; pick a time-based schedule")
        if not isinstance(block["name"], str):
            raise ConfigError("name", f"{block['name']!r} is not a scheduler name; expected e.g. warmup_stable_decay")
        model = ScheduleModel.defined(block["name"])
        if model is not None:  # raises naming base.<key> (pydantic adds 'base'); unknown names: llm-foundry's
            build(model, {k: v for k, v in block.items() if k != "name"}, path="")
        return block

    @model_validator(mode="after")
    def _interval(self) -> ReduceLROnPlateau:
        train = self.monitor.startswith("loss/train/")
        if train and self.check_interval is None:
            raise ConfigError(
                "check_interval",
                f"is required when monitor is a train loss ({self.monitor!r}); e.g. check_interval: 100ba",
            )
        if not train and self.check_interval is not None:
            raise ConfigError(
                "check_interval",
                f"'{self.check_interval}': eval metrics are checked at every evaluation (set eval_interval instead); "
                "check_interval only applies to loss/train/... monitors",
            )
        return self

    @property
    def train_monitor(self) -> bool:
        """Whether the monitor is a train loss (checked every ``check_interval``) rather than an eval metric."""
        return self.monitor.startswith("loss/train/")

    def durations(self) -> dict[str, Duration]:
        # check_interval is not part of the LR formula; the base's durations are its own
        return {"t_warmup": self.t_warmup}

    def rule(self) -> PlateauRule:
        """The decision rule with these settings (torch's arithmetic): what the callback and the preview apply."""
        return PlateauRule(**{key: getattr(self, key) for key in RULE_KEYS})

    def time_multiplier(self, t: int, d: Mapping[str, int], base: float = 1.0) -> float:
        r"""Everything but the plateau scale, :math:`\alpha_{base}(t) \cdot \min(1, t / t_w)`; ``base`` is the first."""
        return self.multiplier(t, d) * base

    def multiplier(self, t: int, d: Mapping[str, int]) -> float:
        r"""The warmup part :math:`\\min(1, t / t_w)` (the base and the scale are multiplied in by the caller)."""
        t_warmup = d["t_warmup"]
        return t / t_warmup if t < t_warmup else 1.0

    def multipliers(self, t: np.ndarray, d: Mapping[str, int]) -> np.ndarray:
        import numpy as np

        t_warmup = d["t_warmup"]
        out = np.ones(len(t), dtype=np.float64)
        warm = t < t_warmup
        out[warm] = t[warm] / t_warmup
        return out
