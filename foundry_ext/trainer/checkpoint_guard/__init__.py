"""Kill a run at any moment and run the same command again: it resumes (``callbacks.checkpoint_guard``).

Composer writes a checkpoint in place and then replaces the ``latest`` symlink (remove, create). A kill during the
write leaves a partial checkpoint that blocks every restart with ``save_overwrite: false`` (``FileExistsError: ...
may conflict with a future checkpoint``); a kill between remove and create leaves no ``latest``, and autoresume
starts from scratch. :class:`CheckpointGuard` repairs both before the Trainer looks (docs/resume.md).

Modules: :mod:`.integrity` (is a checkpoint complete?), :mod:`.recovery` (the decision on a folder, no Composer),
:mod:`.callback` (the Composer callback), :mod:`.finished` (a config transform: a finished run relaunched exits 0
before the model is built). The YAML keys are :class:`foundry_ext.catalog.callbacks.CheckpointGuardConfig`; the
folder's one owner is :mod:`foundry_ext.checkpoint.owner` (no Composer: ``foundry-ext anneal`` reads it too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from foundry_ext._lazy import lazy_exports

_EXPORTS = {
    "CheckpointGuard": "foundry_ext.trainer.checkpoint_guard.callback",
    "CheckpointGuardConfig": "foundry_ext.catalog.callbacks",
}
__all__ = ["CheckpointGuard", "CheckpointGuardConfig"]

if TYPE_CHECKING:
    from foundry_ext.catalog.callbacks import CheckpointGuardConfig
    from foundry_ext.trainer.checkpoint_guard.callback import CheckpointGuard

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
