"""Typed configs: durations, errors, the model base and the registry of names; imports neither torch nor Composer."""

from foundry_ext.config.durations import Duration
from foundry_ext.config.errors import ConfigError, Problem

__all__ = ["ConfigError", "Duration", "Problem"]
