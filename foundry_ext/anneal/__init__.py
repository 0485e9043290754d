"""``foundry-ext anneal``: branch a cooldown from any checkpoint of a stable run, exactly (docs/anneal.md).

* :mod:`~foundry_ext.anneal.options`: ``--decay LEN``, ``--shape``, ``--floor`` read and checked (no torch);
* :mod:`~foundry_ext.anneal.source`: which checkpoint a path names (a file, a folder's latest, a sharded folder) and
  what the branch needs from it (batch, LRs, optimizer, batch size, model config), read with the bounded reader of
  :mod:`foundry_ext.checkpoint` (no code from the file is run);
* :mod:`~foundry_ext.anneal.branch`: the branch's train YAML: checked against the checkpoint, its folder decided,
  its LRs computed with the schedule's own formula.

Every refusal is an :class:`~foundry_ext.anneal.options.AnnealError`, one line, raised before anything is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from foundry_ext._lazy import lazy_exports

_EXPORTS = {
    "AnnealError": "foundry_ext.anneal.options",
    "Branch": "foundry_ext.anneal.branch",
    "plan_branch": "foundry_ext.anneal.branch",
    "write_branch": "foundry_ext.anneal.branch",
}
__all__ = ["AnnealError", "Branch", "plan_branch", "write_branch"]

if TYPE_CHECKING:
    from foundry_ext.anneal.branch import Branch, plan_branch, write_branch
    from foundry_ext.anneal.options import AnnealError

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
