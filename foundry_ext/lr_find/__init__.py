"""The LR range test (Smith 2017) of ``foundry-ext lr-find``: a ramp scheduler, a recording callback, the rules.

Run it from Python on a resolved train config::

    from foundry_ext.config.train_yaml import load_train_config
    from foundry_ext.lr_find import lr_find

    result = lr_find(load_train_config("yamls/tiny-wsd.yaml"), lr_min=1e-7, lr_max=1.0, batches=100)
    print(result.suggested_lr, result.rule)
"""

from foundry_ext.lr_find.ramp import ExponentialRampConfig, ExponentialRampScheduler, ramp_for_batches, ramp_lr
from foundry_ext.lr_find.recorder import LRFindRecorder, TrainLoaderTooShortError
from foundry_ext.lr_find.rules import DEFAULT_BETA, DEFAULT_RULE, RULES, RuleResult, smooth, suggest_all
from foundry_ext.lr_find.runner import LRFindResult, derive_config, lr_find

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
