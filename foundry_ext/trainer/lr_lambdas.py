"""Composer's compiled schedulers: which ``LambdaLR`` runs which ComposerScheduler, and the LR it gives next.

Composer turns each ComposerScheduler into a ``torch.optim.lr_scheduler.LambdaLR`` whose one lambda serves every
param group (``composer.optim.scheduler.compile_composer_scheduler``): a closure over ``scheduler``, ``state`` and
``ssr``. ``LambdaLR`` itself accepts one function per param group (``lr_lambdas``), computes
``base_lr_g * lr_lambdas[g](last_epoch)`` at every ``step()`` and saves ``None`` in its ``state_dict`` for a plain
function (only a callable *object*'s ``__dict__`` is saved), so functions can be swapped in without changing what a
checkpoint holds. This module reads those closures with :func:`inspect.getclosurevars` (a public API): tests that
build a real Trainer (``tests/plateau/test_plateau_groups.py``) fail if a Composer release changes the closure.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Compiled", "compiled_schedulers", "next_lrs"]


@dataclass(frozen=True)
class Compiled:
    """A ``LambdaLR`` of ``state.schedulers`` and the ComposerScheduler (and ``ssr``) behind its lambdas."""

    lambda_lr: Any  # torch.optim.lr_scheduler.LambdaLR
    scheduler: Callable[..., float]
    ssr: float


def _closure(fn: Any) -> dict[str, Any]:
    if not isinstance(fn, types.FunctionType) or fn.__closure__ is None:
        return {}
    return inspect.getclosurevars(fn).nonlocals


def compiled_schedulers(state: Any) -> Iterator[Compiled]:
    """Every ``LambdaLR`` in ``state.schedulers`` whose first lambda closes over a ``scheduler`` (and ``ssr``).

    That is what Composer's ``compile_composer_scheduler`` builds, and what
    :class:`~foundry_ext.trainer.plateau.callback.ReduceLROnPlateauCallback` installs per param group.
    """
    for lambda_lr in getattr(state, "schedulers", None) or []:
        lambdas = getattr(lambda_lr, "lr_lambdas", None)
        if not lambdas:
            continue
        nonlocals = _closure(lambdas[0])
        scheduler = nonlocals.get("scheduler")
        if callable(scheduler):
            yield Compiled(lambda_lr, scheduler, float(nonlocals.get("ssr", 1.0)))


def next_lrs(state: Any) -> list[float] | None:
    """The LR of each param group that the next ``scheduler.step()`` computes at ``state.timestamp``.

    Composer steps the schedulers at the end of each batch, before the timestamp advances: called at timestamp ``t``
    (``t`` batches done), this is the LR of 0-indexed batch ``t + 1``. With several ``LambdaLR``s on one optimizer
    the last one stepped wins, as in the Trainer. ``None`` without a ``LambdaLR``.
    """
    result = None
    for lambda_lr in getattr(state, "schedulers", None) or []:
        lambdas = getattr(lambda_lr, "lr_lambdas", None)
        base_lrs = getattr(lambda_lr, "base_lrs", None)
        if lambdas and base_lrs:
            result = [float(b) * float(fn(lambda_lr.last_epoch + 1)) for fn, b in zip(lambdas, base_lrs, strict=True)]
    return result
