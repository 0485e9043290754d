"""``reduce_lr_on_plateau`` in Composer: a stateless scheduler and the callback (adapter) that holds its state.

The two are one mechanism: :class:`ReduceLROnPlateauScheduler` holds the configuration and multiplies the schedule by
the scale; :class:`ReduceLROnPlateauCallback` owns the plateau state, reads the monitored metric and decides the cuts
with :class:`~foundry_ext.schedules.plateau_rule.PlateauRule` (torch's arithmetic, no torch). The scheduler attaches
the callback to the Trainer at its first call, and the callback binds to its scheduler.
"""

from __future__ import annotations

import inspect
import logging
import math
import sys
from collections.abc import Mapping
from typing import Any, TextIO

import catalogue
import torch
from composer.core import Callback, State
from composer.loggers import Logger
from composer.optim import ComposerScheduler
from composer.utils import dist

from foundry_ext.catalog.callbacks import PlateauCallbackKeys
from foundry_ext.config.base import build
from foundry_ext.config.durations import convert, max_duration_of, now
from foundry_ext.config.errors import ConfigError, Problem, not_a_scheduler, stop_run, yaml_path
from foundry_ext.config.notices import warn_once
from foundry_ext.schedules.plateau import DEFAULT_MONITOR, ReduceLROnPlateau
from foundry_ext.schedules.plateau_rule import Cut, PlateauState
from foundry_ext.trainer.lr_lambdas import compiled_schedulers
from foundry_ext.trainer.schedulers import ModelScheduler

__all__ = ["DEFAULT_MONITOR", "ReduceLROnPlateauCallback", "ReduceLROnPlateauScheduler", "build_base"]

log = logging.getLogger(__name__)

_CALLBACK_FIELD = "callbacks.reduce_lr_on_plateau"

#: Settings saved with the plateau state. A changed ``monitor`` or ``mode`` makes the saved ``best`` meaningless (it
#: is a value of another metric, or better in the other direction): the comparison restarts. The others only change
#: how later evaluations are judged or cut, and apply from the resume on.
RESET_KEYS = ("monitor", "mode")
APPLY_KEYS = ("threshold_mode", "threshold", "patience", "factor", "cooldown", "min_lr", "min_scale", "eps",
              "check_interval")  # fmt: skip


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
            self._decide(state, logger, _as_float(state.eval_metric_values[self._metric]))

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
            _rescale_optimizer_lrs(state, cut.old_scales, cut.new_scales)
            if len(cut.new_scales) > 1:
                scales = f"scales {_fmt(cut.old_scales)} -> {_fmt(cut.new_scales)} (one per param group)"
            else:
                scales = f"scale {cut.old_scale:.6g} -> {cut.new_scale:.6g}"
            message = (
                f"reduce_lr_on_plateau: cut LR {scales} at {_when(state)}: "
                f"{scheduler.monitor}={cut.value:.6g} has not improved on best {cut.best:.6g} for "
                f"{cut.evals_waited} evaluations (patience {scheduler.rule.patience})"
            )
            log.info(message)
            if dist.get_global_rank() == 0:
                # the console logger's stream, so the line lands next to this evaluation's block, not on another pipe
                print(message, file=_console_stream(state), flush=True)
        best = self.plateau.best
        metrics: dict[str, float] = {
            "lr_plateau/scale": self.plateau.scale,
            "lr_plateau/best": math.nan if best is None else best,
            "lr_plateau/num_bad_evals": self.plateau.num_bad_evals,
            "lr_plateau/cuts": self.plateau.cuts,
        }
        groups = len(state.optimizers[0].param_groups) if state.optimizers else 1
        if groups > 1:  # at every check, so each group's series is complete in every logger
            metrics.update({f"lr_plateau/scale/group{g}": s for g, s in enumerate(self.plateau.scales(groups))})
        logger.log_metrics(metrics)

    # -- resume -----------------------------------------------------------------------------------------------------

    def _config(self) -> dict[str, Any]:
        """The settings saved with the state (plain values: the checkpoint is loaded with ``weights_only``)."""
        config = self._scheduler().config
        interval = config.check_interval
        return {
            "monitor": config.monitor,
            "mode": config.mode,
            "threshold_mode": config.threshold_mode,
            "threshold": config.threshold,
            "patience": config.patience,
            "factor": config.factor,
            "cooldown": config.cooldown,
            "min_lr": list(config.min_lr) if isinstance(config.min_lr, list) else config.min_lr,
            "min_scale": config.min_scale,
            "eps": config.eps,
            "check_interval": None if interval is None else str(interval),
        }

    def _compare_with_checkpoint(self, state: State) -> None:
        """After a load: restart the comparison if monitor or mode changed; name every other changed setting."""
        saved, now = self._saved_config, self._config()
        at = f"batch {state.timestamp.batch.value}"
        if saved is None:
            warn_once(
                "reduce_lr_on_plateau: the checkpoint's plateau state does not record its monitor and settings "
                "(written by an older foundry-ext), so a changed monitor or mode cannot be detected; if you changed "
                "them, reset the state with load_ignore_keys: [state/callbacks/ReduceLROnPlateauCallback]"
            )
            return
        reset = [k for k in RESET_KEYS if k in saved and saved[k] != now[k]]
        if reset:
            p = self.plateau
            dropped = f"best {p.best:.6g}" if p.best is not None else "no best yet"
            warn_once(
                f"reduce_lr_on_plateau: resumed at {at} with "
                + ", ".join(f"{k} {now[k]!r} (the checkpoint's: {saved[k]!r})" for k in reset)
                + f": the comparison restarts ({dropped}, {p.num_bad_evals} bad evaluations and cooldown "
                f"{p.cooldown_counter} dropped); the LR scale {_scales(p.scales(len(_base_lrs(state))))} and "
                f"{p.cuts} cuts are kept"
            )
            p.best, p.last_value, p.num_bad_evals, p.cooldown_counter = None, None, 0, 0
            self._window_sum, self._window_count = 0.0, 0
        changed = [k for k in APPLY_KEYS if k in saved and saved[k] != now[k]]
        if changed:
            warn_once(
                f"reduce_lr_on_plateau: settings changed since the checkpoint apply from {at} on: "
                + ", ".join(f"{k} {saved[k]!r} -> {now[k]!r}" for k in changed)
                + f" (kept: {self.plateau.num_bad_evals} bad evaluations, cooldown {self.plateau.cooldown_counter})"
            )

    def _install_group_lambdas(self, state: State) -> None:
        """Give Composer's ``LambdaLR`` one function per param group, so each group follows its own scale.

        Composer compiles the scheduler into one lambda shared by all groups; ``LambdaLR`` takes a list
        (``lr_lambdas``) and saves ``None`` for plain functions, so the checkpoint is unchanged. With one group the
        shared lambda already is the group's.
        """
        if not state.optimizers or len(state.optimizers[0].param_groups) == 1:
            return
        scheduler = self._scheduler()
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


def _rescale_optimizer_lrs(state: State, old: tuple[float, ...], new: tuple[float, ...]) -> None:
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


def _console_stream(state: State) -> TextIO:
    """The stream of the run's ConsoleLogger (where Composer prints the evaluation's block), else stdout."""
    from composer.loggers import ConsoleLogger

    for callback in state.callbacks:
        if isinstance(callback, ConsoleLogger):
            return callback.stream  # type: ignore[return-value]
    return sys.stdout


def _fmt(values: Any) -> str:
    return "[" + ", ".join(f"{v:.6g}" for v in values) + "]"


def _scales(values: list[float]) -> str:
    """One number while every group has the same scale, else one per group."""
    return f"{values[0]:.6g}" if len(set(values)) == 1 else _fmt(values)


def _when(state: State) -> str:
    ts = state.timestamp
    return f"epoch {ts.epoch.value}, batch {ts.batch.value}, {ts.token.value} tokens"


# -- the scheduler -------------------------------------------------------------------------------------------------


def build_base(block: Mapping[str, Any], path: str) -> ComposerScheduler:
    """Build a ``base`` scheduler block through llm-foundry's registry (this package's names included)."""
    from llmfoundry import registry  # slow import: only when a base is configured

    config = dict(block)
    name = config.pop("name")
    try:
        cls = registry.schedulers.get(name)
    except catalogue.RegistryError:
        names = sorted(registry.schedulers.get_all())
        raise ConfigError(f"{path}.name", not_a_scheduler(name, names)) from None
    with yaml_path(path):
        try:
            return cls(**config)
        except TypeError as e:  # a third-party class that does not validate its keys
            raise ConfigError(path, f"{name} rejected its keys: {e}") from None


class ReduceLROnPlateauScheduler(ModelScheduler):
    """``reduce_lr_on_plateau``: the LR is multiplied by ``factor`` when a monitored metric stops improving.

    The adapter reads the monitored value after each evaluation (the monitored evaluator's ``Event.EVAL_END``), or
    every ``check_interval`` for a train loss, applies :class:`PlateauRule` (torch's arithmetic), and saves its state in
    the checkpoint. This scheduler attaches the adapter to the Trainer the first time it is called, unless one is
    already in ``callbacks``; then it uses that one. Evaluations before ``t_warmup`` is over are logged but do not
    count.

    Args:
        monitor (str): Logged metric name. Default = ``"metrics/eval/LanguageCrossEntropy"``.
        mode (str): ``min`` or ``max``. Default = ``"min"``.
        factor (float): Cut factor in (0, 1): ``s <- s * factor``. Default = ``0.1`` (torch's).
        patience (int): Evaluations with no improvement tolerated before a cut. Default = ``10``.
        threshold (float): Minimum change that counts as improvement. Default = ``1e-4``.
        threshold_mode (str): ``rel`` or ``abs``. Default = ``"rel"``.
        cooldown (int): Evaluations to wait after a cut before counting again. Default = ``0``.
        min_lr (float | list[float]): Absolute LR floor, per param group if a list. Default = ``0.0``.
        min_scale (float): Floor of the scale, as a fraction of the base LR. Default = ``0.0``.
        eps (float): Cuts that change the LR by less than this are skipped. Default = ``1e-8``.
        t_warmup (str | Time): Linear warmup before the plateau logic applies. Default = ``"0ba"``.
        scale_warmup (bool): Whether ``scale_schedule_ratio`` scales ``t_warmup``. Default = ``False``.
        check_interval (str | Time, optional): How often a train-loss monitor is checked (mean of the synced
            ``loss/train/*`` values since the last check). Required for ``loss/train/...`` monitors, not allowed for
            eval metrics (those are checked at every evaluation). Default = ``None``.
        base (dict | ComposerScheduler, optional): Another schedule multiplied in, as a YAML block
            (``{name: warmup_stable_decay, ...}``) or a scheduler object. Default = ``None``.
    """

    Config = ReduceLROnPlateau

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        config = self.config
        self.train_monitor = config.train_monitor
        self.rule = config.rule()
        base = config.base
        self.base = build_base(base, f"{self.path}.base") if isinstance(base, Mapping) else base
        # Composer's rule (compile_composer_scheduler): a scheduler whose signature has one parameter takes no ssr
        self._base_takes_ssr = self.base is None or len(inspect.signature(self.base).parameters) != 1
        self.callback = ReduceLROnPlateauCallback()
        self.callback.bind(self)
        self._state_id: int | None = None
        self.last_ssr = 1.0

    def is_check_time(self, state: State) -> bool:
        """For a train-loss monitor: whether the batch that just ended closes a ``check_interval``."""
        assert self.config.check_interval is not None
        interval = convert(self.config.check_interval, max_duration_of(state), state.dataloader_len)
        return interval.value > 0 and now(state, interval.unit) % interval.value == 0

    def in_warmup(self, state: State, ssr: float = 1.0) -> bool:
        """Whether ``state`` is before the end of ``t_warmup`` (evaluations there do not count)."""
        d = self.resolve(state, ssr)
        return now(state, d.unit) < d.values["t_warmup"]

    def time_multiplier(self, state: State, ssr: float = 1.0) -> float:
        """Everything but the plateau scale: ``base(t) * min(1, t / t_warmup)``."""
        d = self.resolve(state, ssr)
        base = 1.0 if self.base is None else self._base(state, ssr)
        return self.config.time_multiplier(now(state, d.unit), d.values, base)

    def _base(self, state: State, ssr: float) -> float:
        if self._base_takes_ssr:
            return self.base(state, ssr)
        if ssr != 1.0:
            raise ConfigError(
                f"{self.path}.base",
                f"{self.base!r} takes only (state), so it cannot follow scale_schedule_ratio={ssr}; give a base "
                "scheduler that takes (state, ssr), or train with scale_schedule_ratio: 1.0",
            )
        return self.base(state)

    def group_multiplier(self, state: State, ssr: float, group: int) -> float:
        """The multiplier of param group ``group``: ``time_multiplier(t) * s_group``."""
        return self.time_multiplier(state, ssr) * self.callback.plateau.scale_of(group)

    def __call__(self, state: State, ssr: float = 1.0) -> float:
        """The multiplier of param group 0 (of every group while they share one scale).

        With several param groups the adapter gives Composer's ``LambdaLR`` one function per group
        (:meth:`group_multiplier`) at ``Event.FIT_START``, so that each group can stop at its own ``min_lr``.
        """
        self.last_ssr = ssr
        if self._state_id != id(state):  # first call on this Trainer (its LambdaLR is being built): attach
            self.callback = ReduceLROnPlateauCallback.attach(self, state)
            self._check_param_groups(state)
            self._state_id = id(state)
        return self.time_multiplier(state, ssr) * self.callback.plateau.scale

    def _check_param_groups(self, state: State) -> None:
        """A ``min_lr`` list must have one value per param group: checked while the Trainer is built."""
        min_lr = self.config.min_lr
        if not state.optimizers or not isinstance(min_lr, list):
            return
        groups = len(state.optimizers[0].param_groups)
        if len(min_lr) != groups:
            raise ConfigError(
                f"{self.path}.min_lr",
                f"{min_lr!r} has {len(min_lr)} values but the optimizer has {groups} param group"
                f"{'s' if groups != 1 else ''}; give one number for all groups, or exactly one per param group",
            )
