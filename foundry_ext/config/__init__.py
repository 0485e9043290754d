"""The floor of the package; imports no other layer.

:mod:`.durations` (Composer durations), :mod:`.errors` (one line per problem), :mod:`.notices` (a warning once),
:mod:`.base` (the config-model base), :mod:`.problems` (a model's validation errors as YAML problems),
:mod:`.train_yaml` (reading a train YAML).
"""

from foundry_ext.config.durations import Duration
from foundry_ext.config.errors import ConfigError, Problem

__all__ = ["ConfigError", "Duration", "Problem"]
