"""What the pre-flight check of a train YAML found: errors, warnings, notes (:class:`Findings`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from foundry_ext.config.errors import Problem
from foundry_ext.config.train_yaml import RunClock
from foundry_ext.schedules.base import ScheduleModel

__all__ = ["Findings"]


@dataclass
class Findings:
    """What :func:`check_train_config` found.

    Errors: the run would fail or misbehave. Warnings: it trains, but not as the config suggests (a warmup longer than
    the run). Notes: checks that could not be made (e.g. epochs without a known dataset size).
    """

    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    scheduler: ScheduleModel | None = None
    clock: RunClock | None = None
