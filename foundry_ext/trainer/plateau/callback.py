"""``reduce_lr_on_plateau``'s callback (adapter): it holds the plateau state, reads the monitored metric, decides cuts.

The decision is :class:`~foundry_ext.schedules.plateau_rule.PlateauRule`'s (torch's arithmetic, no torch), on rank 0's
value broadcast to every rank (:mod:`.broadcast`); a cut reaches the optimizer through :mod:`.group_lrs` and is
reported by :mod:`.report`; a resume is compared with the checkpoint's settings by :mod:`.resume`.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING, Any

from composer.core import Callback, State
from composer.loggers import Logger
from composer.utils import dist

from foundry_ext.catalog.callbacks import PlateauCallbackKeys
from foundry_ext.config.base import build
from foundry_ext.config.errors import ConfigError, Problem, stop_run
from foundry_ext.config.notices import warn_once
from foundry_ext.schedules.plateau_rule import Cut, PlateauState
from foundry_ext.trainer.plateau.broadcast import as_float, broadcast_value
from foundry_ext.trainer.plateau.group_lrs import base_lrs, install_group_lambdas, rescale_optimizer_lrs
from foundry_ext.trainer.plateau.report import console_stream, cut_line, plateau_metrics, when
from foundry_ext.trainer.plateau.resume import reconcile, saved_settings

if TYPE_CHECKING:
    from foundry_ext.trainer.plateau.scheduler import ReduceLROnPlateauScheduler

__all__ = ["ReduceLROnPlateauCallback"]

log = logging.getLogger(__name__)

_CALLBACK_FIELD = "callbacks.reduce_lr_on_plateau"


class ReduceLROnPlateauCallback(Callback):
    """Reads the monitored metric after evaluation and updates the plateau scale of its scheduler.

    All the mutable plateau state lives here (:class:`PlateauState`) and is saved in Composer checkpoints under this
    class's ``__qualname__``; do not rename the class. The scheduler :class:`ReduceLROnPlateauScheduler` holds the
    configuration and reads each param group's scale (``plateau.scale_of(g)``) at every call. The saved state also
    records those settings, so that a resume with another monitor or mode restarts the comparison (and other changes
    are listed) at ``Event.FIT_START``.

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
        self._fit_started = False
        self._saved_config: dict[str, Any] | None = None  # the settings the loaded state was made with
        self._in_training_eval = False  # between EVAL_BEFORE_ALL and EVAL_AFTER_ALL: evaluations of fit()
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

    def after_load(self, state: State, logger: Logger) -> None:
        del logger  # unused
        # Event.AFTER_LOAD ends Trainer.__init__ (with or without a checkpoint): from here on, anything that steps
        # or evaluates the LambdaLR (the resume check at FIT_START, a user) sees one function per param group.
        if self.scheduler is not None:  # a listed adapter without its scheduler fails at FIT_START, as documented
            self._install_group_lambdas(state)

    def fit_start(self, state: State, logger: Logger) -> None:
        del logger  # unused
        scheduler = self._scheduler()
        if not self._fit_started:  # the first fit() after the Trainer was built (and loaded its checkpoint)
            self._fit_started = True
            if state.timestamp.batch.value > 0 and not self._restored:
                # one line, both causes: the callback cannot tell a load_ignore_keys reset from a foreign checkpoint
                warn_once(
                    f"reduce_lr_on_plateau: resumed at batch {state.timestamp.batch.value} with no plateau state in "
                    "the checkpoint; starting fresh (scale 1, no best value): it was reset with load_ignore_keys, or "
                    "the checkpoint was saved without foundry-ext"
                )
            if self._restored:
                self._compare_with_checkpoint(state)
        self._install_group_lambdas(state)
        if scheduler.train_monitor:
            return
        available = sorted(
            f"metrics/{evaluator.label}/{name}"
            for evaluator in state.evaluators
            for name in state.eval_metrics.get(evaluator.label, {})
        )
        problem = None
        if not state.evaluators:
            problem = Problem(
                "scheduler.monitor",
                f"{scheduler.monitor!r} is an eval metric but the run has no evaluator; add an eval_loader, or "
                "monitor a train loss: monitor: loss/train/total with check_interval: 100ba",
            )
        elif scheduler.monitor not in available:
            problem = Problem(
                "scheduler.monitor",
                f"{scheduler.monitor!r} is not produced by any evaluator; available: {', '.join(available)}",
            )
        if problem is not None:  # before the first batch: one line and status 2, no traceback
            stop_run([problem])

    def eval_before_all(self, state: State, logger: Logger) -> None:
        del state, logger  # unused
        self._in_training_eval = True  # Trainer.eval() (standalone) runs neither this nor EVAL_AFTER_ALL

    def eval_end(self, state: State, logger: Logger) -> None:
        # Decided here, not at EVAL_AFTER_ALL: Composer runs callbacks before loggers at every event but INIT, so
        # lr_plateau/* reach the console logger before it prints this evaluation's block (and every logger at the
        # evaluation's timestamp). No training happens between the evaluators, so the cut takes effect identically.
        if not self._in_training_eval or state.dataloader_label != self._label:
            return
        if self._metric in state.eval_metric_values:
            self._decide(state, logger, as_float(state.eval_metric_values[self._metric]))

    def eval_after_all(self, state: State, logger: Logger) -> None:
        del state, logger  # unused
        self._in_training_eval = False

    def batch_end(self, state: State, logger: Logger) -> None:
        scheduler = self._scheduler()
        if not scheduler.train_monitor:
            return
        batch = state.timestamp.batch.value - 1
        if any(getattr(cb, "skipped_batch", None) == batch for cb in state.callbacks):
            return  # callbacks.spike_guard skipped this step: its loss is no training progress to judge
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
        value = broadcast_value(state, value)
        cut: Cut | None = None
        if scheduler.in_warmup(state, scheduler.last_ssr):
            self.plateau.last_value = value
        else:
            if not math.isfinite(value):
                log.warning(
                    "reduce_lr_on_plateau: %s is %s at %s; counted as no improvement",
                    scheduler.monitor,
                    value,
                    when(state),
                )
            cut = scheduler.rule.step(self.plateau, value, base_lrs(state))
        if cut is not None:
            rescale_optimizer_lrs(state, cut.old_scales, cut.new_scales)
            message = cut_line(cut, state, scheduler.monitor, scheduler.rule.patience)
            log.info(message)
            if dist.get_global_rank() == 0:
                # the console logger's stream, so the line lands next to this evaluation's block, not on another pipe
                print(message, file=console_stream(state), flush=True)
        groups = len(state.optimizers[0].param_groups) if state.optimizers else 1
        logger.log_metrics(plateau_metrics(self.plateau, groups))

    # -- resume -----------------------------------------------------------------------------------------------------

    def _config(self) -> dict[str, Any]:
        """The settings saved with the state (:func:`~foundry_ext.trainer.plateau.resume.saved_settings`)."""
        return saved_settings(self._scheduler().config)

    def _compare_with_checkpoint(self, state: State) -> None:
        """After a load: restart the comparison if monitor or mode changed; name every other changed setting."""
        groups = len(base_lrs(state)) if state.optimizers else 1
        if reconcile(self.plateau, self._saved_config, self._config(), state.timestamp.batch.value, groups):
            self._window_sum, self._window_count = 0.0, 0

    def _install_group_lambdas(self, state: State) -> None:
        """Give Composer's ``LambdaLR`` one function per param group (:func:`.group_lrs.install_group_lambdas`)."""
        install_group_lambdas(self._scheduler(), state)

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
            # what the state means: compared with the resumed run's settings at FIT_START
            "config": self._config() if self.scheduler is not None else self._saved_config,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.plateau = PlateauState.from_dict(state["plateau"])
        self._window_sum = float(state.get("window_sum", 0.0))
        self._window_count = int(state.get("window_count", 0))
        self._saved_config = state.get("config")  # None in checkpoints written before it was recorded
        self._restored = True
