"""The ComposerSchedulers that llm-foundry builds (through the ``llmfoundry_schedulers`` entry points).

Each one validates its keys with its model (:mod:`foundry_ext.schedules`) and is a pure function of
``state.timestamp``. Importing a module here imports Composer.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "COMPOSER_SCHEDULERS": "foundry_ext.schedulers.composer",
    "TorchLRScheduler": "foundry_ext.schedulers.torch_lr",
    "WarmupStableDecayScheduler": "foundry_ext.schedulers.wsd",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'foundry_ext.schedulers' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
