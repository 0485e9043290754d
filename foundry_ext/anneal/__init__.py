"""``foundry-ext anneal``: branch a cooldown from any checkpoint of a stable run, exactly (docs/anneal.md).

* :mod:`~foundry_ext.anneal.options`: ``--decay LEN``, ``--shape``, ``--floor`` read and checked (no torch);
* :mod:`~foundry_ext.anneal.source`: which checkpoint a path names (a file, a folder's latest, a sharded folder) and
  what the branch needs from it (batch, LRs, optimizer, batch size, model config), read with the bounded reader of
  :mod:`foundry_ext.checkpoint` (no code from the file is run);
* :mod:`~foundry_ext.anneal.branch`: the branch's plan (:func:`plan_branch`: decides, writes nothing), made of
  :mod:`~foundry_ext.anneal.checks` (its --out, name, run, budget and folder checked against the checkpoint),
  :mod:`~foundry_ext.anneal.schedule` (its scheduler block and LRs, from the LR pipeline) and
  :mod:`~foundry_ext.anneal.ramp` (a batch-size ramp's branch, in the decay's units);
* :mod:`~foundry_ext.anneal.write`: the branch's YAML written, its source kept (:mod:`~foundry_ext.anneal.keep`).

Every refusal is an :class:`~foundry_ext.anneal.options.AnnealError`, one line, raised before anything is written.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from foundry_ext._lazy import lazy_exports

_EXPORTS = {
    "AnnealError": "foundry_ext.anneal.options",
    "Branch": "foundry_ext.anneal.branch",
    "plan_branch": "foundry_ext.anneal.branch",
    "write_branch": "foundry_ext.anneal.write",
}
__all__ = ["AnnealError", "Branch", "plan_branch", "write_branch"]

if TYPE_CHECKING:
    from foundry_ext.anneal.branch import Branch, plan_branch
    from foundry_ext.anneal.options import AnnealError
    from foundry_ext.anneal.write import write_branch

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
