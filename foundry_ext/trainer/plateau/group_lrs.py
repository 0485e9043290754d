"""Each param group's LR under the plateau: its own LambdaLR function, and a cut applied to the batch about to run.

The plateau scale can differ by param group (each stops at its own ``min_lr``), while Composer compiles a scheduler
into one ``LambdaLR`` function shared by every group: :func:`install_group_lambdas` gives the ``LambdaLR`` one
function per group; :func:`rescale_optimizer_lrs` applies a cut decided after a batch to the next one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from composer.core import State

from foundry_ext.config.errors import ConfigError
from foundry_ext.trainer.lr_lambdas import compiled_schedulers

if TYPE_CHECKING:
    from foundry_ext.trainer.plateau.scheduler import ReduceLROnPlateauScheduler

__all__ = ["base_lrs", "install_group_lambdas", "rescale_optimizer_lrs"]


def install_group_lambdas(scheduler: ReduceLROnPlateauScheduler, state: State) -> None:
    """Give Composer's ``LambdaLR`` one function per param group, so each group follows its own scale.

    Composer compiles the scheduler into one lambda shared by all groups; ``LambdaLR`` takes a list
    (``lr_lambdas``) and saves ``None`` for plain functions, so the checkpoint is unchanged. With one group the
    shared lambda already is the group's.
    """
    if not state.optimizers or len(state.optimizers[0].param_groups) == 1:
        return
    found = [c for c in compiled_schedulers(state) if c.scheduler is scheduler]
    if not found:
        raise ConfigError(
            "scheduler.name",
            "reduce_lr_on_plateau with several param groups needs the LambdaLR Composer compiles from it, and "
            "none was found in state.schedulers (a Composer version this package does not know?)",
        )
    for compiled in found:
        groups = len(compiled.lambda_lr.optimizer.param_groups)
        compiled.lambda_lr.lr_lambdas = [_group_lambda(scheduler, state, compiled.ssr, g) for g in range(groups)]


def base_lrs(state: State) -> list[float]:
    """The LRs the schedule multiplies: LambdaLR keeps them as ``initial_lr`` in each param group."""
    groups = state.optimizers[0].param_groups
    return [float(g.get("initial_lr", g["lr"])) for g in groups]


def rescale_optimizer_lrs(state: State, old: tuple[float, ...], new: tuple[float, ...]) -> None:
    """Apply a cut to the LR of the batch about to run, group by group.

    Composer steps the LambdaLR at the end of each batch, before evaluation, so the LR of the next batch was computed
    with the old scales. Multiplying each group's LR (and the scheduler's ``_last_lr``) by ``new_g/old_g`` is what
    that step would have produced with the new scales, since the multiplier is linear in the scale. This write lasts
    one batch on purpose: the next step recomputes every LR from the scheduler, which carries the new scales.
    """
    ratios = [n / o if n != o else 1.0 for o, n in zip(old, new, strict=True)]
    for group, ratio in zip(state.optimizers[0].param_groups, ratios, strict=True):
        group["lr"] = group["lr"] * ratio
    for scheduler in state.schedulers:
        last = getattr(scheduler, "_last_lr", None)
        if isinstance(last, list) and len(last) == len(ratios):
            scheduler._last_lr = [lr * ratio for lr, ratio in zip(last, ratios, strict=True)]


def _group_lambda(scheduler: ReduceLROnPlateauScheduler, state: State, ssr: float, group: int) -> Any:
    """A plain function (``LambdaLR`` saves ``None`` for it) giving param group ``group``'s multiplier."""

    def lr_lambda(epoch: int) -> float:
        del epoch  # like Composer's own lambda: the multiplier is a function of state.timestamp
        return scheduler.group_multiplier(state, ssr, group)

    return lr_lambda
