"""The plateau adapter: a Composer Callback that owns the plateau state and decides the cuts."""

from __future__ import annotations

import logging
import math
import warnings
from typing import TYPE_CHECKING, Any

import torch
from composer.core import Callback, State
from composer.loggers import Logger
from composer.utils import dist

from foundry_ext.config.base import build
from foundry_ext.config.errors import ConfigError
from foundry_ext.config.registry import PlateauCallbackKeys
from foundry_ext.plateau.rule import Cut, PlateauState

if TYPE_CHECKING:
    from foundry_ext.plateau.scheduler import ReduceLROnPlateauScheduler

__all__ = ["ReduceLROnPlateauCallback"]

log = logging.getLogger(__name__)

_CALLBACK_FIELD = "callbacks.reduce_lr_on_plateau"


class ReduceLROnPlateauCallback(Callback):
    """Reads the monitored metric after evaluation and updates the plateau scale of its scheduler.

    All the mutable plateau state lives here (:class:`PlateauState`) and is saved in Composer checkpoints under this
    class's ``__qualname__``; do not rename the class. The scheduler :class:`ReduceLROnPlateauScheduler` holds the
    configuration and reads ``plateau.scale`` at every call.

    Listing it under ``callbacks:`` is optional (the scheduler attaches one); a listed one takes no arguments: the
    configuration is the scheduler's.

    Every rank takes the same decision: the value is broadcast from rank 0 (one float64 collective per check, none
    per training batch), and the update is a deterministic function of it.
    """

    def __init__(self, **kwargs: Any) -> None:
        build(PlateauCallbackKeys, kwargs, _CALLBACK_FIELD)  # takes no keys: one line naming each one given
        self.plateau = PlateauState()
        self.scheduler: ReduceLROnPlateauScheduler | None = None
        self._restored = False
        self._pending: float | None = None  # eval value seen at EVAL_END, decided at EVAL_AFTER_ALL
        self._window_sum = 0.0  # train-loss monitor: synced losses since the last check
        self._window_count = 0
        self._label = ""
        self._metric = ""

    # -- wiring --------------------------------------------------------------------------------------------------

    def bind(self, scheduler: ReduceLROnPlateauScheduler) -> None:
        """Take ``scheduler``'s configuration (one scheduler per adapter)."""
        if self.scheduler is not None and self.scheduler is not scheduler:
            raise ConfigError(_CALLBACK_FIELD, "this adapter is already bound to another reduce_lr_on_plateau")
        self.scheduler = scheduler
        if not scheduler.train_monitor:
            self._label, _, self._metric = scheduler.monitor[len("metrics/") :].rpartition("/")

    @classmethod
    def attach(cls, scheduler: ReduceLROnPlateauScheduler, state: State) -> ReduceLROnPlateauCallback:
        """Return the adapter ``scheduler`` should use on ``state``, adding it to ``state.callbacks`` if absent.

        A ``reduce_lr_on_plateau`` listed under ``callbacks:`` is adopted instead of attaching a second one.
        """
        existing = [cb for cb in state.callbacks if isinstance(cb, cls)]
        if len(existing) > 1:
            raise ConfigError(_CALLBACK_FIELD, f"{len(existing)} plateau adapters in callbacks; list at most one")
        if existing:
            adapter = existing[0]
            adapter.bind(scheduler)  # raises if it serves another scheduler
            return adapter
        if not state.optimizers:  # a bare State (foundry-ext plot/validate): nothing to attach to
            return scheduler.callback
        if len(state.optimizers) > 1:
            raise ConfigError(
                "scheduler.name",
                f"reduce_lr_on_plateau needs exactly one optimizer, got {len(state.optimizers)}: Composer compiles "
                "schedulers into one LambdaLR, which supports a single optimizer",
            )
        state.callbacks.append(scheduler.callback)
        return scheduler.callback

    # -- events ----------------------------------------------------------------------------------------------------

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger  # unused
        scheduler = self._scheduler()
        if state.timestamp.batch.value > 0 and not self._restored:
            log.warning(
                "reduce_lr_on_plateau: the checkpoint holds no plateau state (saved without foundry-ext?); "
                "starting with fresh state (scale 1.0, no best value)",
            )
            warnings.warn("reduce_lr_on_plateau: no plateau state in the checkpoint; starting fresh", stacklevel=1)
        if scheduler.train_monitor:
            return
        available = sorted(
            f"metrics/{evaluator.label}/{name}"
            for evaluator in state.evaluators
            for name in state.eval_metrics.get(evaluator.label, {})
        )
        if not state.evaluators:
            raise ConfigError(
                "scheduler.monitor",
                f"{scheduler.monitor!r} is an eval metric but the run has no evaluator; add an eval_loader, or "
                "monitor a train loss: monitor: loss/train/total with check_interval: 100ba",
            )
        if scheduler.monitor not in available:
            raise ConfigError(
                "scheduler.monitor",
                f"{scheduler.monitor!r} is not produced by any evaluator; available: {', '.join(available)}",
            )

    def eval_end(self, state: State, logger: Logger) -> None:
        del logger  # unused
        if state.dataloader_label == self._label and self._metric in state.eval_metric_values:
            self._pending = _as_float(state.eval_metric_values[self._metric])

    def eval_after_all(self, state: State, logger: Logger) -> None:
        if self._pending is None:
            return
        value, self._pending = self._pending, None
        self._decide(state, logger, value)

    def batch_end(self, state: State, logger: Logger) -> None:
        scheduler = self._scheduler()
        if not scheduler.train_monitor:
            return
        losses = state.total_loss_dict  # already all-reduced by the Trainer: the same on every rank
        if scheduler.monitor not in losses:
            raise ConfigError(
                "scheduler.monitor",
                f"{scheduler.monitor!r} is not logged by this model; available: {', '.join(sorted(losses))}",
            )
        self._window_sum += float(losses[scheduler.monitor])
        self._window_count += 1
        if scheduler.is_check_time(state):
            value = self._window_sum / self._window_count
            self._window_sum, self._window_count = 0.0, 0
            self._decide(state, logger, value)

    # -- the decision --------------------------------------------------------------------------------------------

    def _decide(self, state: State, logger: Logger, value: float) -> None:
        scheduler = self._scheduler()
        # Rank 0's value is the value: one small collective per check makes every rank's input bitwise identical.
        value = _broadcast(state, value)
        cut: Cut | None = None
        if scheduler.in_warmup(state, scheduler.last_ssr):
            self.plateau.last_value = value
        else:
            if not math.isfinite(value):
                log.warning(
                    "reduce_lr_on_plateau: %s is %s at %s; counted as no improvement",
                    scheduler.monitor,
                    value,
                    _when(state),
                )
            cut = scheduler.rule.step(self.plateau, value, _base_lrs(state))
        if cut is not None:
            _rescale_optimizer_lrs(state, cut.new_scale / cut.old_scale)
            message = (
                f"reduce_lr_on_plateau: cut LR scale {cut.old_scale:.6g} -> {cut.new_scale:.6g} at {_when(state)}: "
                f"{scheduler.monitor}={cut.value:.6g} has not improved on best {cut.best:.6g} for "
                f"{cut.evals_waited} evaluations (patience {scheduler.rule.patience})"
            )
            log.info(message)
            if dist.get_global_rank() == 0:
                print(message, flush=True)
        best = self.plateau.best
        logger.log_metrics(
            {
                "lr_plateau/scale": self.plateau.scale,
                "lr_plateau/best": math.nan if best is None else best,
                "lr_plateau/num_bad_evals": self.plateau.num_bad_evals,
                "lr_plateau/cuts": self.plateau.cuts,
            },
        )

    def _scheduler(self) -> ReduceLROnPlateauScheduler:
        if self.scheduler is None:
            raise ConfigError(
                _CALLBACK_FIELD,
                "is listed but the scheduler is not reduce_lr_on_plateau; set scheduler.name: reduce_lr_on_plateau "
                "(the callback takes its settings from there)",
            )
        return self.scheduler

    # -- checkpointing -------------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        return {
            "plateau": self.plateau.to_dict(),
            "window_sum": self._window_sum,
            "window_count": self._window_count,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.plateau = PlateauState.from_dict(state["plateau"])
        self._window_sum = float(state.get("window_sum", 0.0))
        self._window_count = int(state.get("window_count", 0))
        self._restored = True


def _as_float(value: Any) -> float:
    return float(value.item() if isinstance(value, torch.Tensor) else value)


def _broadcast(state: State, value: float) -> float:
    if dist.get_world_size() == 1:
        return value
    tensor = state.device.tensor_to_device(torch.tensor([value], dtype=torch.float64))
    dist.broadcast(tensor, src=0)
    return float(tensor.item())


def _base_lrs(state: State) -> list[float]:
    """The LRs the schedule multiplies: LambdaLR keeps them as ``initial_lr`` in each param group."""
    groups = state.optimizers[0].param_groups
    return [float(g.get("initial_lr", g["lr"])) for g in groups]


def _rescale_optimizer_lrs(state: State, ratio: float) -> None:
    """Apply a cut to the LR of the batch about to run.

    Composer steps the LambdaLR at the end of each batch, before evaluation, so the LR of the next batch was computed
    with the old scale. Multiplying it (and the scheduler's ``_last_lr``) by ``new/old`` is exactly what that step
    would have produced with the new scale, since the multiplier is linear in the scale; later steps recompute from
    the scheduler and carry the cut themselves.
    """
    for group in state.optimizers[0].param_groups:
        group["lr"] = group["lr"] * ratio
    for scheduler in state.schedulers:
        last = getattr(scheduler, "_last_lr", None)
        if isinstance(last, list):
            scheduler._last_lr = [lr * ratio for lr in last]


def _when(state: State) -> str:
    ts = state.timestamp
    return f"epoch {ts.epoch.value}, batch {ts.batch.value}, {ts.token.value} tokens"
