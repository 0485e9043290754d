"""The floor of the package: durations, errors, the config-model base, train-YAML reading; imports no other layer."""

from foundry_ext.config.durations import Duration
from foundry_ext.config.errors import ConfigError, Problem

__all__ = ["ConfigError", "Duration", "Problem"]
