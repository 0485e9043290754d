"""Stateless Composer schedulers: pure functions of ``state.timestamp``, one family per module."""

from foundry_ext.schedulers.composer import COMPOSER_SCHEDULERS
from foundry_ext.schedulers.wsd import WarmupStableDecayScheduler

__all__ = ["COMPOSER_SCHEDULERS", "WarmupStableDecayScheduler"]
