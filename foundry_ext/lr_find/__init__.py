"""The LR range test (Smith 2017) of ``foundry-ext lr-find``: a ramp scheduler, a recording callback, the rules.

Run it from Python on a resolved train config::

    from foundry_ext.config.train_yaml import load_train_config
    from foundry_ext.lr_find import lr_find

    result = lr_find(load_train_config("yamls/tiny-wsd.yaml"), lr_min=1e-7, lr_max=1.0, batches=100)
    print(result.suggested_lr, result.rule)

The names are imported on first use (PEP 562), so that ``foundry-ext lr-find`` checks its options (with the light
:mod:`~foundry_ext.lr_find.rules` and :mod:`~foundry_ext.lr_find.runner`) before Composer and torch are imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from foundry_ext._lazy import lazy_exports

# public name -> the module that defines it (imported on first use: ramp and recorder import Composer and torch)
_EXPORTS = {
    "DEFAULT_BETA": "foundry_ext.lr_find.rules",
    "DEFAULT_RULE": "foundry_ext.lr_find.rules",
    "ExponentialRampConfig": "foundry_ext.lr_find.ramp",
    "ExponentialRampScheduler": "foundry_ext.lr_find.ramp",
    "LRFindRecorder": "foundry_ext.lr_find.recorder",
    "LRFindResult": "foundry_ext.lr_find.runner",
    "RULES": "foundry_ext.lr_find.rules",
    "RuleResult": "foundry_ext.lr_find.rules",
    "TrainLoaderTooShortError": "foundry_ext.lr_find.recorder",
    "derive_config": "foundry_ext.lr_find.runner",
    "lr_find": "foundry_ext.lr_find.runner",
    "ramp_for_batches": "foundry_ext.lr_find.ramp",
    "ramp_lr": "foundry_ext.lr_find.ramp",
    "smooth": "foundry_ext.lr_find.rules",
    "suggest_all": "foundry_ext.lr_find.rules",
}

__all__ = [
    "DEFAULT_BETA",
    "DEFAULT_RULE",
    "RULES",
    "ExponentialRampConfig",
    "ExponentialRampScheduler",
    "LRFindRecorder",
    "LRFindResult",
    "RuleResult",
    "TrainLoaderTooShortError",
    "derive_config",
    "lr_find",
    "ramp_for_batches",
    "ramp_lr",
    "smooth",
    "suggest_all",
]

if TYPE_CHECKING:
    from foundry_ext.lr_find.ramp import ExponentialRampConfig, ExponentialRampScheduler, ramp_for_batches, ramp_lr
    from foundry_ext.lr_find.recorder import LRFindRecorder, TrainLoaderTooShortError
    from foundry_ext.lr_find.rules import DEFAULT_BETA, DEFAULT_RULE, RULES, RuleResult, smooth, suggest_all
    from foundry_ext.lr_find.runner import LRFindResult, derive_config, lr_find

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
