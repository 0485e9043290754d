"""The bad-config corpus: one table, :data:`BAD`, of train configs that must stop before training, each with the
YAML field its one line names; and :data:`GOOD`, valid configs (unusual on purpose) that must pass. The tests of each
surface (``foundry-ext validate``, llm-foundry's ``train_from_yaml``, the warning when training starts, FSDP2 on two
ranks) are in ``tests/catalog/test_bad_configs.py``.

The rows are written in three sections, by where they came from:

* written by hand (:data:`HAND_BAD`, :data:`FSDP2_BAD`, :data:`HAND_GOOD`, on :data:`HAND_BASE`, a 100-batch run):
  types, ranges, NaN/inf, unknown keys, units, overlaps, warmups past the run, nested torch children, callback
  misuse, what FSDP2 refuses on two ranks;
* issue 21's families (:data:`FAMILY_BAD`, :data:`FAMILY_GOOD`, on :data:`FAMILY_BASE`, 40 batches of 4 x 64
  tokens), applied to every scheduler by name (an unknown key; every duration key given text, a fraction of a batch, a
  negative value, and where the formula needs it positive a value that truncates to 0 batches; every number key given
  text, NaN, infinity), then the callbacks and the optimizer block one by one, and issue 34's cases;
* issue 21's whole-run LR cases (:data:`RUN_LR_BAD`, on :data:`RUN_LR_BASE`; checked before batch 0 by
  :mod:`foundry_ext.schedules.run_lr`): each used to train silently (LR 0 every batch, a plateau that never checks,
  a non-finite LR) or fail after the model was built.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from foundry_ext.catalog.registry import SCHEDULE_MODELS
from foundry_ext.schedules.run_lr import POSITIVE_DURATIONS
from tests.support.configs import changed, tiny_train_config
from tests.support.launcher import REPO

__all__ = ["BAD", "GOOD", "Bad"]


class Bad(NamedTuple):
    """One bad config and the line it must give."""

    config: dict[str, Any]  # the whole train config
    field: str  # the YAML field the line names
    fragment: str = ""  # a fragment of that line ("": naming the field is enough)
    # "error": refused by validate and, before anything is built, by llm-foundry's train_from_yaml; "warning": refused
    # by validate --strict, and one line when training starts; "problem": refused by validate --strict (either)
    kind: str = "problem"
    ranks: int = 1  # 2: refused only with FSDP2 (FSDP_VERSION=2) on two ranks


# -- written by hand -------------------------------------------------------------------------------------------------

HAND_BASE: dict[str, Any] = tiny_train_config(max_duration="100ba")


def S(**block: Any) -> dict[str, Any]:
    """A config whose scheduler block is ``block``."""
    return {"scheduler": block}


def T(type_: str, **kwargs: Any) -> dict[str, Any]:
    return S(name="torch_lr_scheduler", type=type_, **kwargs)


def P(**kwargs: Any) -> dict[str, Any]:
    return S(name="reduce_lr_on_plateau", **kwargs)


SEQ = [{"type": "LinearLR", "start_factor": 0.1, "total_iters": 10}, {"type": "CosineAnnealingLR", "T_max": 90}]
NAN, INF = float("nan"), float("inf")

# id -> (changes to HAND_BASE, the field the line must name, a fragment of the message)
HAND_BAD: dict[str, tuple[dict[str, Any], str, str]] = {
    # -- top level --------------------------------------------------------------------------------------------
    "max_duration-missing": ({"max_duration": None}, "max_duration", "missing"),
    "max_duration-text": ({"max_duration": "abc"}, "max_duration", "not a duration"),
    "max_duration-zero": ({"max_duration": "0ba"}, "max_duration", "must be > 0"),
    "max_duration-dur": ({"max_duration": "1dur"}, "max_duration", "'dur' is relative"),
    # issue 46, found by tests/catalog/test_fuzz_ramp_fsdp.py: validate said OK (with a note) and plot refused
    "gtbs-text": ({"global_train_batch_size": "16"}, "global_train_batch_size", "'16' is not allowed"),
    "gtbs-negative": ({"global_train_batch_size": -8}, "global_train_batch_size", "-8 is not allowed"),
    "gtbs-bool": ({"global_train_batch_size": True}, "global_train_batch_size", "True is not allowed"),
    "scheduler-missing": ({"scheduler": None}, "scheduler", "missing"),
    "scheduler-no-name": (S(t_warmup="10ba"), "scheduler.name", "missing"),
    "scheduler-name-typo": (S(name="warmup_stabel_decay"), "scheduler.name", "did you mean 'warmup_stable_decay'"),
    "scheduler-name-int": (S(name=3), "scheduler.name", "not a registered scheduler"),
    # -- warmup_stable_decay -----------------------------------------------------------------------------------
    "wsd-unknown-key": (
        S(name="warmup_stable_decay", decay_tpye="sqrt"),
        "scheduler.decay_tpye",
        "did you mean 'decay_type'",
    ),
    "wsd-alpha_f-range": (
        S(name="warmup_stable_decay", alpha_f=1.5),
        "scheduler.alpha_f",
        "expected a number in [0, 1]",
    ),
    "wsd-alpha_f-nan": (S(name="warmup_stable_decay", alpha_f=NAN), "scheduler.alpha_f", "not a finite number"),
    "wsd-alpha_f-str": (S(name="warmup_stable_decay", alpha_f="0.1"), "scheduler.alpha_f", "is not a number"),
    "wsd-t_warmup-fraction": (S(name="warmup_stable_decay", t_warmup="2.5ba"), "scheduler.t_warmup", "whole number"),
    "wsd-t_warmup-int": (S(name="warmup_stable_decay", t_warmup=10), "scheduler.t_warmup", "not a duration"),
    "wsd-t_warmup-seconds": (S(name="warmup_stable_decay", t_warmup="10sec"), "scheduler.t_warmup", "wall-clock"),
    "wsd-t_warmup-iter": (S(name="warmup_stable_decay", t_warmup="10iter"), "scheduler.t_warmup", "unit 'iter'"),
    "wsd-t_decay-negative": (S(name="warmup_stable_decay", t_decay="-5ba"), "scheduler.t_decay", "must be >= 0"),
    "wsd-t_decay-words": (S(name="warmup_stable_decay", t_decay="5 bananas"), "scheduler.t_decay", "not a duration"),
    "wsd-t_max-zero": (S(name="warmup_stable_decay", t_max="0ba"), "scheduler.t_max", "must be > 0"),
    "wsd-decay_type": (S(name="warmup_stable_decay", decay_type="sqr"), "scheduler.decay_type", "did you mean 'sqrt'"),
    "wsd-warmup_type": (S(name="warmup_stable_decay", warmup_type="exp"), "scheduler.warmup_type", "allowed"),
    "wsd-scale_warmup": (S(name="warmup_stable_decay", scale_warmup="yes"), "scheduler.scale_warmup", "true or false"),
    "wsd-overlap-same-unit": (
        S(name="warmup_stable_decay", t_warmup="50ba", t_decay="60ba", t_max="100ba"),
        "scheduler.t_decay",
        "do not fit",
    ),
    "wsd-overlap-run": (
        S(name="warmup_stable_decay", t_warmup="60ba", t_decay="0.5dur"),
        "scheduler.t_decay",
        "60 + 50",
    ),
    "wsd-units-mixed": (S(name="warmup_stable_decay", t_warmup="100tok", t_decay="20ba"), "scheduler", "convert"),
    "wsd-warmup-longer-than-run": (
        S(name="warmup_stable_decay", t_warmup="300ba", t_decay="0ba", t_max="400ba"),
        "scheduler.t_warmup",
        "longer than the run",
    ),
    # -- Composer's schedules by name ----------------------------------------------------------------------------
    "step-missing": (S(name="step"), "scheduler.step_size", "is required"),
    "step-zero": (S(name="step", step_size="0ba"), "scheduler.step_size", "must be > 0"),
    "step-gamma-negative": (S(name="step", step_size="10ba", gamma=-1), "scheduler.gamma", "expected a number > 0"),
    "step-gamma-zero": (S(name="step", step_size="10ba", gamma=0), "scheduler.gamma", "out of range"),
    "step-gamma-text": (S(name="step", step_size="10ba", gamma="abc"), "scheduler.gamma", "not a number"),
    "step-typo": (S(name="step", step_size="10ba", gama=0.5), "scheduler.gama", "did you mean 'gamma'"),
    "multistep-string": (S(name="multistep", milestones="10ba"), "scheduler.milestones", "not a list"),
    "multistep-item": (S(name="multistep", milestones=["10ba", "x"]), "scheduler.milestones[1]", "not a duration"),
    "exponential-missing": (S(name="exponential"), "scheduler.gamma", "is required"),
    "exponential-negative": (S(name="exponential", gamma=-1), "scheduler.gamma", "out of range"),
    "exponential-period-zero": (S(name="exponential", gamma=0.9, decay_period="0ep"), "scheduler.decay_period", "> 0"),
    "constant-inf": (S(name="constant", alpha=INF), "scheduler.alpha", "not a finite number"),
    "linear-negative": (S(name="linear", alpha_f=-0.5), "scheduler.alpha_f", "out of range"),
    "cosine-negative": (S(name="cosine", alpha_f=-0.1), "scheduler.alpha_f", "out of range"),
    "restarts-t_mult": (
        S(name="cosine_with_restarts", t_0="10ba", t_mult=0.5),
        "scheduler.t_mult",
        "expected a number >= 1",
    ),
    "restarts-t_0-fraction": (S(name="cosine_with_restarts", t_0="2.5ba"), "scheduler.t_0", "whole number"),
    "polynomial-power-zero": (S(name="polynomial", power=0), "scheduler.power", "out of range"),
    "polynomial-missing": (S(name="polynomial"), "scheduler.power", "is required"),
    "poly-warmup-t_max-short": (
        S(name="polynomial_with_warmup", t_warmup="5ba", t_max="50ba"),
        "scheduler.t_max",
        "shorter than max_duration",
    ),
    "poly-warmup-scale-int": (
        S(name="polynomial_with_warmup", t_warmup="5ba", scale_warmup=1),
        "scheduler.scale_warmup",
        "boolean",
    ),
    "multistep-warmup-longer": (
        S(name="multistep_with_warmup", t_warmup="200ba", milestones=["50ba"]),
        "scheduler.t_warmup",
        "longer than the run",
    ),
    "poly-warmup-longer": (
        S(name="polynomial_with_warmup", t_warmup="150ba", t_max="200ba"),
        "scheduler.t_warmup",
        "longer than the run",
    ),
    # -- llm-foundry's own --------------------------------------------------------------------------------------
    "cosine_with_warmup-missing": (S(name="cosine_with_warmup"), "scheduler.t_warmup", "is required"),
    "cosine_with_warmup-fraction": (
        S(name="cosine_with_warmup", t_warmup="2.5ba"),
        "scheduler.t_warmup",
        "whole number",
    ),
    "cosine_with_warmup-longer": (
        S(name="cosine_with_warmup", t_warmup="500ba"),
        "scheduler.t_warmup",
        "longer than the run",
    ),
    "cosine_with_warmup-t_max": (
        S(name="cosine_with_warmup", t_warmup="5ba", t_max="50ba"),
        "scheduler.t_max",
        "shorter",
    ),
    "cosine_with_warmup-typo": (
        S(name="cosine_with_warmup", t_warmup="5ba", alpha=0.1),
        "scheduler.alpha",
        "unknown key",
    ),
    "linear_decay-scale": (
        S(name="linear_decay_with_warmup", t_warmup="5ba", scale_warmup=1),
        "scheduler.scale_warmup",
        "boolean",
    ),
    "constant_with_warmup-longer": (
        S(name="constant_with_warmup", t_warmup="0.5ep"),
        "scheduler.t_warmup",
        "whole number",
    ),
    "inv_sqrt-dur": (
        S(name="inv_sqrt_with_warmup", t_warmup="0.1dur", t_scale="10ba", t_cooldown="0ba"),
        "scheduler.t_warmup",
        "refuses 'dur'",
    ),
    "inv_sqrt-alphas": (
        S(name="inv_sqrt_with_warmup", t_warmup="5ba", t_scale="10ba", t_cooldown="0ba", alpha_f_cooldown=0.5),
        "scheduler.alpha_f_cooldown",
        "alpha_f_decay >= alpha_f_cooldown",
    ),
    "inv_sqrt-units": (
        S(name="inv_sqrt_with_warmup", t_warmup="500tok", t_scale="10ba", t_cooldown="0ba"),
        "scheduler.t_warmup",
        "unit of max_duration",
    ),
    # -- torch_lr_scheduler -------------------------------------------------------------------------------------
    "torch-type-typo": (T("StepLr", step_size=1), "scheduler.type", "did you mean 'StepLR'"),
    "torch-type-missing": (S(name="torch_lr_scheduler", step_size=1), "scheduler.type", "is required"),
    "torch-lambda": (T("LambdaLR"), "scheduler.type", "callable"),
    "torch-plateau": (T("ReduceLROnPlateau"), "scheduler.type", "reduce_lr_on_plateau"),
    "torch-optimizer": (T("StepLR", step_size=1, optimizer="sgd"), "scheduler.optimizer", "cannot be set"),
    "torch-last_epoch": (T("StepLR", step_size=1, last_epoch=5), "scheduler.last_epoch", "cannot be set"),
    "torch-unknown-key": (T("StepLR", step_sz=10), "scheduler.step_sz", "did you mean 'step_size'"),
    "steplr-missing": (T("StepLR", gamma=0.5), "scheduler.step_size", "is required by StepLR"),
    "steplr-string": (T("StepLR", step_size="10"), "scheduler.step_size", "not an integer"),
    "steplr-zero": (T("StepLR", step_size=0), "scheduler.step_size", "integer >= 1"),
    "steplr-negative": (T("StepLR", step_size=-5), "scheduler.step_size", "integer >= 1"),
    "steplr-float": (T("StepLR", step_size=2.5), "scheduler.step_size", "not an integer"),
    "steplr-gamma-nan": (T("StepLR", step_size=10, gamma=NAN), "scheduler.gamma", "not a finite number"),
    "steplr-gamma-inf": (T("StepLR", step_size=10, gamma=INF), "scheduler.gamma", "not a finite number"),
    "steplr-gamma-text": (T("StepLR", step_size=10, gamma="abc"), "scheduler.gamma", "not a number"),
    "exponentiallr-negative": (T("ExponentialLR", gamma=-1), "scheduler.gamma", "out of range"),
    "exponentiallr-missing": (T("ExponentialLR"), "scheduler.gamma", "is required"),
    "multisteplr-string": (T("MultiStepLR", milestones="5"), "scheduler.milestones", "not a list"),
    "linearlr-negative": (T("LinearLR", total_iters=-3), "scheduler.total_iters", "integer >= 1"),
    "linearlr-zero": (T("LinearLR", total_iters=0), "scheduler.total_iters", "integer >= 1"),
    "linearlr-start-zero": (T("LinearLR", start_factor=0), "scheduler.start_factor", "(0, 1]"),
    "linearlr-start-big": (T("LinearLR", start_factor=1.5), "scheduler.start_factor", "(0, 1]"),
    "linearlr-end": (T("LinearLR", end_factor=-0.1), "scheduler.end_factor", "[0, 1]"),
    "constantlr-zero": (T("ConstantLR", factor=0), "scheduler.factor", "(0, 1]"),
    "constantlr-big": (T("ConstantLR", factor=2.0), "scheduler.factor", "(0, 1]"),
    "cosinelr-zero": (T("CosineAnnealingLR", T_max=0), "scheduler.T_max", "integer >= 1"),
    "cosinelr-eta": (T("CosineAnnealingLR", T_max=10, eta_min=-1), "scheduler.eta_min", ">= 0"),
    "warmrestarts-zero": (T("CosineAnnealingWarmRestarts", T_0=0), "scheduler.T_0", "integer >= 1"),
    "warmrestarts-mult": (T("CosineAnnealingWarmRestarts", T_0=10, T_mult=1.5), "scheduler.T_mult", "not an integer"),
    "cycliclr-mode": (T("CyclicLR", base_lr=0.1, max_lr=1.0, mode="triangle"), "scheduler.mode", "did you mean"),
    "cycliclr-bounds": (T("CyclicLR", base_lr=1.0, max_lr=0.1), "scheduler.max_lr", "need base_lr <= max_lr"),
    "cycliclr-step": (T("CyclicLR", base_lr=0.1, max_lr=1.0, step_size_up=0), "scheduler.step_size_up", ">= 1"),
    "cycliclr-scale_fn": (T("CyclicLR", base_lr=0.1, max_lr=1.0, scale_fn="f"), "scheduler.scale_fn", "cannot be set"),
    "cycliclr-list": (T("CyclicLR", base_lr=[0.1, 0.2], max_lr=1.0), "scheduler.base_lr", "not a number"),
    "onecycle-missing": (T("OneCycleLR", max_lr=1.0), "scheduler.total_steps", "is required"),
    "onecycle-strategy": (
        T("OneCycleLR", max_lr=1.0, total_steps=100, anneal_strategy="cosine"),
        "scheduler.anneal_strategy",
        "allowed: cos, linear",
    ),
    "onecycle-pct": (T("OneCycleLR", max_lr=1.0, total_steps=100, pct_start=1.5), "scheduler.pct_start", "(0, 1)"),
    "onecycle-phase": (
        T("OneCycleLR", max_lr=1.0, total_steps=10, pct_start=0.1),
        "scheduler.total_steps",
        "zero length",
    ),
    "onecycle-short": (T("OneCycleLR", max_lr=1.0, total_steps=50), "scheduler.total_steps", "defined for 50 steps"),
    "onecycle-three_phase": (
        T("OneCycleLR", max_lr=1.0, total_steps=100, three_phase="yes"),
        "scheduler.three_phase",
        "boolean",
    ),
    "polynomiallr-power": (T("PolynomialLR", power=-1), "scheduler.power", ">= 0"),
    "sequential-nested-range": (
        T("SequentialLR", schedulers=[SEQ[0], {"type": "CosineAnnealingLR", "T_max": 0}], milestones=[10]),
        "scheduler.schedulers[1].T_max",
        "integer >= 1",
    ),
    "sequential-nested-type": (
        T("SequentialLR", schedulers=[SEQ[0], {"type": "Cosine"}], milestones=[10]),
        "scheduler.schedulers[1].type",
        "not a torch.optim.lr_scheduler class",
    ),
    "sequential-nested-key": (
        T("SequentialLR", schedulers=[SEQ[0], {"type": "CosineAnnealingLR", "T_mx": 9}], milestones=[10]),
        "scheduler.schedulers[1].T_mx",
        "did you mean 'T_max'",
    ),
    "sequential-nested-gamma": (
        T("SequentialLR", schedulers=[{"type": "ExponentialLR", "gamma": NAN}, SEQ[1]], milestones=[10]),
        "scheduler.schedulers[0].gamma",
        "not a finite number",
    ),
    "sequential-milestones": (
        T("SequentialLR", schedulers=SEQ, milestones=[10, 20]),
        "scheduler.milestones",
        "expected 1",
    ),
    "sequential-nested-composite": (
        T("ChainedScheduler", schedulers=[{"type": "SequentialLR", "schedulers": SEQ, "milestones": [10]}]),
        "scheduler.schedulers[0].type",
        "cannot be nested",
    ),
    "sequential-missing": (T("SequentialLR", milestones=[]), "scheduler.schedulers", "is required"),
    # -- reduce_lr_on_plateau -----------------------------------------------------------------------------------
    "plateau-factor-1": (P(factor=1.0), "scheduler.factor", "(0, 1)"),
    "plateau-factor-0": (P(factor=0), "scheduler.factor", "(0, 1)"),
    "plateau-factor-nan": (P(factor=NAN), "scheduler.factor", "not a finite number"),
    "plateau-patience-negative": (P(patience=-1), "scheduler.patience", "integer >= 0"),
    "plateau-patience-float": (P(patience=1.5), "scheduler.patience", "not an integer"),
    "plateau-patience-text": (P(patience="2"), "scheduler.patience", "not an integer"),
    "plateau-cooldown": (P(cooldown=-2), "scheduler.cooldown", "integer >= 0"),
    "plateau-mode": (P(mode="minimum"), "scheduler.mode", "did you mean 'min'"),
    "plateau-threshold_mode": (P(threshold_mode="relative"), "scheduler.threshold_mode", "allowed: rel, abs"),
    "plateau-threshold": (P(threshold=-1), "scheduler.threshold", ">= 0"),
    "plateau-eps": (P(eps=NAN), "scheduler.eps", "not a finite number"),
    "plateau-min_lr": (P(min_lr=-1), "scheduler.min_lr", "out of range"),
    "plateau-min_lr-list": (P(min_lr=[0.0, -1.0]), "scheduler.min_lr", "out of range"),
    "plateau-min_scale": (P(min_scale=2), "scheduler.min_scale", "[0, 1]"),
    "plateau-key-typo": (P(patiance=3), "scheduler.patiance", "did you mean 'patience'"),
    "plateau-monitor-format": (P(monitor="eval_loss"), "scheduler.monitor", "not a metric name Composer logs"),
    "plateau-monitor-typo": (
        P(monitor="metrics/eval/LanguageCrossEntropyy"),
        "scheduler.monitor",
        "did you mean 'LanguageCrossEntropy'",
    ),
    "plateau-monitor-label": (P(monitor="metrics/eval/c4/LanguageCrossEntropy"), "scheduler.monitor", "'eval/c4'"),
    "plateau-monitor-no-eval": ({**P(), "eval_loader": None}, "scheduler.monitor", "no eval_loader"),
    "plateau-train-monitor-interval": (P(monitor="loss/train/total"), "scheduler.check_interval", "is required"),
    "plateau-train-monitor-name": (
        P(monitor="loss/train/ce", check_interval="10ba"),
        "scheduler.monitor",
        "loss/train/total",
    ),
    "plateau-check_interval-eval": (P(check_interval="10ba"), "scheduler.check_interval", "only applies to loss/train"),
    "plateau-check_interval-fraction": (
        P(monitor="loss/train/total", check_interval="0.5ep"),
        "scheduler.check_interval",
        "whole number",
    ),
    "plateau-base-name": (P(base={"name": "cosine_warmup"}), "scheduler.base.name", "not a registered scheduler"),
    "plateau-base-self": (P(base={"name": "reduce_lr_on_plateau"}), "scheduler.base.name", "its own base"),
    "plateau-base-key": (
        P(base={"name": "warmup_stable_decay", "t_decya": "1ba"}),
        "scheduler.base.t_decya",
        "unknown key",
    ),
    "plateau-base-missing": (P(base={"name": "cosine_with_warmup"}), "scheduler.base.t_warmup", "is required"),
    "plateau-base-overlap": (
        P(base={"name": "warmup_stable_decay", "t_warmup": "60ba", "t_decay": "0.5dur"}),
        "scheduler.base.t_decay",
        "do not fit",
    ),
    "plateau-base-not-block": (P(base="cosine"), "scheduler.base", "not a scheduler block"),
    "plateau-warmup-longer": (P(t_warmup="200ba"), "scheduler.t_warmup", "longer than the run"),
    # -- callbacks ------------------------------------------------------------------------------------------------
    "callback-plateau-without-scheduler": (
        {"callbacks": {"reduce_lr_on_plateau": {}}},
        "callbacks.reduce_lr_on_plateau",
        "scheduler.name is 'warmup_stable_decay'",
    ),
    "callback-plateau-key": (
        {**P(), "callbacks": {"reduce_lr_on_plateau": {"factor": 0.5}}},
        "callbacks.reduce_lr_on_plateau.factor",
        "takes no keys",
    ),
    "callback-typo": ({"callbacks": {"lr_monitr": {}}}, "callbacks.lr_monitr", "did you mean 'lr_monitor'"),
    "callback-foundry-key": ({"callbacks": {"lr_monitor": {"foo": 1}}}, "callbacks.lr_monitor.foo", "unknown key"),
    "callback-foundry-required": (
        {"callbacks": {"early_stopper": {"patience": 2}}},
        "callbacks.early_stopper.monitor",
        "is required",
    ),
    "callback-not-mapping": ({"callbacks": {"lr_monitor": 3}}, "callbacks.lr_monitor", "expected a mapping"),
    "callbacks-list": ({"callbacks": ["lr_monitor"]}, "callbacks", "expected a mapping"),
    # issue 46: validate accepted it, and the run crashed with an OverflowError once the guard built its window
    "spike-guard-window-2**63": (
        {"callbacks": {"spike_guard": {"window": 2**63, "min_history": 2}}},
        "callbacks.spike_guard.window",
        "9223372036854775808 is out of range; expected an integer in [2, 100000]",
    ),
    "spike-guard-min-history-2**63": (
        {"callbacks": {"spike_guard": {"min_history": 2**63}}},
        "callbacks.spike_guard.min_history",
        "9223372036854775808 is out of range; expected an integer in [2, 100000]",
    ),
    "spike-guard-window-1e30": (
        {"callbacks": {"spike_guard": {"window": 1e30}}},
        "callbacks.spike_guard.window",
        "is not an integer; expected an integer in [2, 100000]",
    ),
    "spike-guard-threshold-inf": (
        {"callbacks": {"spike_guard": {"threshold": INF}}},
        "callbacks.spike_guard.threshold",
        "expected a number > 0",
    ),
    "spike-guard-ceiling-nan": ({"callbacks": {"spike_guard": {"ceiling": NAN}}}, "callbacks.spike_guard.ceiling", ""),
    "spike-guard-rollback-folder-int": (
        {"callbacks": {"spike_guard": {"rollback": {"save_folder": 5}}}},
        "callbacks.spike_guard.rollback.save_folder",
        "5 (int) is not a string",
    ),
    "spike-guard-skip-data-negative": (
        {"callbacks": {"spike_guard": {"skip_data": {"at_batch": -1, "batches": 1}}}},
        "callbacks.spike_guard.skip_data.at_batch",
        "-1 is out of range",
    ),
    # issue 46: the injector that shows spike_guard acting, registered for YAML use this round
    "inject-bad-batches-no-at": (
        {"callbacks": {"inject_bad_batches": {}}},
        "callbacks.inject_bad_batches.at",
        "required",
    ),
    "inject-bad-batches-at-empty": (
        {"callbacks": {"inject_bad_batches": {"at": []}}},
        "callbacks.inject_bad_batches.at",
        "",
    ),
    "inject-bad-batches-at-negative": (
        {"callbacks": {"inject_bad_batches": {"at": [3, -1]}}},
        "callbacks.inject_bad_batches.at[1]",
        "-1 is out of range",
    ),
    "inject-bad-batches-vocab-0": (
        {"callbacks": {"inject_bad_batches": {"at": [3], "vocab_size": 0}}},
        "callbacks.inject_bad_batches.vocab_size",
        "0 is out of range; expected an integer >= 1",
    ),
    "inject-bad-batches-typo": (
        {"callbacks": {"inject_bad_batches": {"at": [3], "vocab": 512}}},
        "callbacks.inject_bad_batches.vocab",
        "",
    ),
    "resume-check-reset-lr-text": (
        {"callbacks": {"schedule_resume_check": {"reset_lr": "yes"}}},
        "callbacks.schedule_resume_check.reset_lr",
        "'yes' (str) is not a boolean",
    ),
    "resume-check-reset-lr-typo": (
        {"callbacks": {"schedule_resume_check": {"reset_lrr": True}}},
        "callbacks.schedule_resume_check.reset_lrr",
        "unknown key (did you mean 'reset_lr'?)",
    ),
    # issue 34: known from the YAML, refused before the model is built (the callback found them at BEFORE_LOAD, or
    # only when a partial checkpoint had to be moved)
    "guard-quarantine-like-latest": (
        {"save_folder": "runs/x", "callbacks": {"checkpoint_guard": {"quarantine_folder": "latest-rank0.pt"}}},
        "callbacks.checkpoint_guard.quarantine_folder",
        "named like a checkpoint file",
    ),
    "guard-compressed-save_filename": (
        {
            "save_folder": "runs/x",
            "save_filename": "ep{epoch}-ba{batch}-rank{rank}.pt.lz4",
            "callbacks": {"checkpoint_guard": {}},
        },
        "save_filename",
        "is compressed or a tar archive",
    ),
    # issue 42: a folder load_path (a sharded checkpoint's) on a run that loads files; on one rank llm-foundry drops
    # fsdp_config (the rows on 2 ranks with FSDP2: FSDP2_BAD below; through the launcher: test_fsdp_resume.py)
    "load_path-folder-without-fsdp": (
        {"load_path": str(REPO / "tests" / "resume" / "fixtures")},
        "load_path",
        "this run has no fsdp_config",
    ),
    "load_path-folder-fsdp-on-one-rank": (
        {"load_path": str(REPO / "tests" / "resume" / "fixtures"), "fsdp_config": {"state_dict_type": "sharded"}},
        "load_path",
        "this run has 1 rank, where llm-foundry drops fsdp_config",
    ),
    # FSDP1 (FSDP_VERSION unset: Composer's default, on CUDA): a misspelt value is a KeyError once the model is built,
    # a misspelt key is kept unused; validate found both, training did not before this round
    "fsdp1-sharding_strategy-misspelt": (
        {"fsdp_config": {"sharding_strategy": "FULL_SHRAD"}},
        "fsdp_config.sharding_strategy",
        "'FULL_SHRAD' is not allowed (did you mean 'FULL_SHARD'?); expected one of FULL_SHARD, SHARD_GRAD_OP",
    ),
    "fsdp1-unknown-key": (
        {"fsdp_config": {"sharding_stratgy": "FULL_SHARD"}},
        "fsdp_config.sharding_stratgy",
        "unknown key (did you mean 'sharding_strategy'?): Composer's FSDPConfig keeps it without using it",
    ),
}

# Issue 42, what needs FSDP2 on 2 ranks: checked with FSDP_VERSION=2 and `validate --world-size 2`, and through
# llm-foundry's train_from_yaml with WORLD_SIZE=2 (the config transforms run before it starts a process group).
# id -> (changes to HAND_BASE, the field the line must name, a fragment of the message)
SHARDED = {"state_dict_type": "sharded"}
FSDP2_BAD: dict[str, tuple[dict[str, Any], str, str]] = {
    "fsdp2-sharding_strategy": (
        {"fsdp_config": {**SHARDED, "sharding_strategy": "SHARD_GRAD_OP"}},
        "fsdp_config.sharding_strategy",
        "reshard_after_forward: false is what SHARD_GRAD_OP did",
    ),
    "fsdp2-use_orig_params": (
        {"fsdp_config": {"use_orig_params": False}},
        "fsdp_config.use_orig_params",
        "FSDP2 (FSDP_VERSION=2) has no such setting",
    ),
    "fsdp2-sharded_ckpt_prefix_dir": (
        {"fsdp_config": {**SHARDED, "sharded_ckpt_prefix_dir": "step{batch}"}},
        "fsdp_config.sharded_ckpt_prefix_dir",
        "always names checkpoint folders ep{epoch}-ba{batch}",
    ),
    "load_path-file-on-sharded-run": (
        {"fsdp_config": SHARDED, "load_path": "runs/x/checkpoints/ep0-ba10-rank0.pt"},
        "load_path",
        "is a checkpoint file",
    ),
    "load_path-file-on-fsdp2-default": (  # FSDP2's state_dict_type defaults to sharded (FSDP1's to full)
        {
            "fsdp_config": {"mixed_precision": "FULL"},
            "load_path": str(REPO / "tests" / "resume" / "fixtures" / "plateau_resume" / "ep0-ba12-rank0.pt"),
        },
        "load_path",
        "this run loads sharded checkpoint folders",
    ),
    "load_path-folder-without-metadata": (
        {"fsdp_config": SHARDED, "load_path": str(REPO / "tests" / "resume" / "fixtures")},
        "load_path",
        "has no .metadata (and no .distcp shard)",
    ),
    "load_path-folder-state_dict_type-full": (
        {"fsdp_config": {"state_dict_type": "full"}, "load_path": str(REPO / "tests" / "resume" / "fixtures")},
        "load_path",
        "this run has fsdp_config.state_dict_type: full",
    ),
    # issue 46, found by tests/catalog/test_fuzz_ramp_fsdp.py: values Composer took without a word and acted on
    # otherwise (a misspelt state_dict_type saved full checkpoints; the string "false" is true)
    "fsdp-state_dict_type-misspelt": (
        {"fsdp_config": {"state_dict_type": "shraded"}},
        "fsdp_config.state_dict_type",
        "'shraded' is not allowed; allowed: full or sharded",
    ),
    "fsdp-bool-as-text": (
        {"fsdp_config": {**SHARDED, "activation_checkpointing": "false"}},
        "fsdp_config.activation_checkpointing",
        "'false' is not allowed; allowed: true or false",
    ),
    "fsdp2-mixed_precision-unknown": (
        {"fsdp_config": {**SHARDED, "mixed_precision": "bf16"}},
        "fsdp_config.mixed_precision",
        "allowed: one of DEFAULT, PURE, FULL, or a mapping of dtypes",
    ),
    "fsdp_config-not-a-block": ({"fsdp_config": 5}, "fsdp_config", "5 is not a block"),
}

# Valid configs, which must pass (Composer defaults, llm-foundry defaults, units Composer converts).
HAND_GOOD: dict[str, dict[str, Any]] = {
    "wsd": {},
    "wsd-tokens": {"max_duration": "6400tok", **S(name="warmup_stable_decay", t_warmup="640tok", t_decay="0.2dur")},
    "wsd-epochs-mds": {"max_duration": "2ep", **S(name="warmup_stable_decay", t_warmup="1ep")},
    "exponential-default-period": S(name="exponential", gamma=0.99),
    "step": S(name="step", step_size="10ba"),
    "multistep-mixed-units": S(name="multistep_with_warmup", t_warmup="640tok", milestones=["50ba"]),
    # Composer's own test table builds it (warmup, then constant): a note, not a refusal (issue 21)
    "multistep-empty": S(name="multistep", milestones=[]),
    "cosine_with_warmup": S(name="cosine_with_warmup", t_warmup="10ba"),
    "inv_sqrt": S(name="inv_sqrt_with_warmup", t_warmup="5ba", t_scale="10ba", t_cooldown="10ba"),
    "torch-sequential": T("SequentialLR", schedulers=SEQ, milestones=[10]),
    "torch-onecycle-exact": T("OneCycleLR", max_lr=1.0, total_steps=99),
    "torch-cyclic": T("CyclicLR", base_lr=0.1, max_lr=1.0, step_size_up=10),
    "plateau": P(factor=0.5, patience=2, base={"name": "warmup_stable_decay", "t_decay": "0.1dur"}),
    "plateau-train-monitor": P(monitor="loss/train/total", check_interval="10ba"),
    "plateau-listed-callback": {**P(), "callbacks": {"reduce_lr_on_plateau": {}, "lr_monitor": {}}},
    "other-callbacks": {"callbacks": {"speed_monitor": {"window_size": 10}, "generate_callback": {"anything": 1}}},
}


def hand_config(changes: dict[str, Any]) -> dict[str, Any]:
    """:data:`HAND_BASE` with ``changes`` (a key set, or dropped as None); a run in epochs reads the demo data's
    train split (its index gives the batches per epoch)."""
    cfg = changed(HAND_BASE, changes)
    if isinstance(cfg.get("train_loader"), dict) or "ep" in str(cfg.get("max_duration")):
        cfg["train_loader"] = {
            "name": "text",
            "drop_last": True,
            "dataset": {"local": str(REPO / "demo-data"), "split": "train"},
        }
    return cfg


# -- issue 21's families ---------------------------------------------------------------------------------------------

FAMILY_BASE: dict[str, Any] = tiny_train_config(t_warmup="4ba", eval_interval="10ba")

# A minimal valid block of every scheduler by name (checked valid by test_every_minimal_block_is_valid).
MINIMAL: dict[str, dict[str, Any]] = {
    "warmup_stable_decay": {"t_warmup": "4ba"},
    "wsd_periods": {"t_warmup": "2ba", "t_decay": "2ba", "periods": ["20ba", "20ba"]},
    "inverse_sqrt": {"t_warmup": "4ba"},
    "power": {"t_warmup": "4ba"},
    "stages": {"stages": [{"duration": "1dur", "shape": "linear", "end": 0.1}]},
    "step": {"step_size": "4ba"},
    "multistep": {"milestones": ["10ba", "20ba"]},
    "multistep_with_warmup": {"t_warmup": "2ba", "milestones": ["10ba"]},
    "constant": {},
    "linear": {},
    "exponential": {"gamma": 0.9},
    "cosine": {},
    "cosine_with_restarts": {"t_0": "10ba"},
    "polynomial": {"power": 2.0},
    "polynomial_with_warmup": {"t_warmup": "2ba"},
    "constant_with_warmup": {"t_warmup": "2ba"},
    "cosine_with_warmup": {"t_warmup": "2ba"},
    "linear_decay_with_warmup": {"t_warmup": "2ba"},
    "inv_sqrt_with_warmup": {"t_warmup": "2ba", "t_scale": "4ba", "t_cooldown": "4ba"},
    "reduce_lr_on_plateau": {},
    "torch_lr_scheduler": {"type": "StepLR", "step_size": 10},
}


def _sched(name: str, **changes: Any) -> dict[str, Any]:
    block = {"name": name, **MINIMAL[name], **changes}
    return {"scheduler": {k: v for k, v in block.items() if v is not None}}


def _guard(**keys: Any) -> dict[str, Any]:
    return {"callbacks": {"lr_monitor": {}, "checkpoint_guard": keys}}


def _is(annotation: Any, word: str) -> bool:
    return word in str(annotation)


def _families() -> dict[str, tuple[dict[str, Any], str]]:
    cases: dict[str, tuple[dict[str, Any], str]] = {}
    for name, model in SCHEDULE_MODELS.items():
        if name not in MINIMAL:
            continue
        cases[f"{name}-unknown-key"] = (_sched(name, zzz_typo=1), "scheduler.zzz_typo")
        for key, field in model.model_fields.items():
            if key in getattr(model, "hidden_keys", ()) or key == "name":
                continue
            annotation = field.annotation
            if _is(annotation, "Duration") and not _is(annotation, "list"):
                cases[f"{name}-{key}-text"] = (_sched(name, **{key: "abc"}), f"scheduler.{key}")
                cases[f"{name}-{key}-fraction"] = (_sched(name, **{key: "2.5ba"}), f"scheduler.{key}")
                if key in POSITIVE_DURATIONS and name != "reduce_lr_on_plateau":
                    # no warmup or decay to overlap with: the truncation itself is what is refused
                    # (power's warmup must be > 0: its overlap check refuses a 0-batch t_max, naming t_decay)
                    fit = {"t_warmup": "0ba", "t_decay": "0ba"} if name == "warmup_stable_decay" else {}
                    named = "scheduler.t_decay" if name == "power" else f"scheduler.{key}"
                    cases[f"{name}-{key}-zero-batches"] = (_sched(name, **fit, **{key: "0.001dur"}), named)
            elif annotation in (float, int) or (_is(annotation, "float") and not _is(annotation, "list")):
                if field.is_required() and key not in MINIMAL[name]:
                    continue
                cases[f"{name}-{key}-text"] = (_sched(name, **{key: "x"}), f"scheduler.{key}")
                cases[f"{name}-{key}-nan"] = (_sched(name, **{key: math.nan}), f"scheduler.{key}")
    return cases


FAMILY_BAD: dict[str, tuple[dict[str, Any], str]] = {
    **_families(),
    # -- issue 21's run-time cases ------------------------------------------------------------------------------
    "wsd_periods-peak-1e30": (_sched("wsd_periods", peaks=[1, 1e30]), "scheduler"),
    "step-gamma-1e308": (_sched("step", gamma=1e308), "scheduler"),
    "multistep-gamma-huge": (_sched("multistep", gamma=1e5), "scheduler"),
    "exponential-gamma-grows": (_sched("exponential", gamma=2.0, decay_period="1ba"), "scheduler"),
    "cosine_with_warmup-t_max-half": (_sched("cosine_with_warmup", t_max="0.5dur"), "scheduler.t_max"),
    "constant_with_warmup-t_max-10ba": (_sched("constant_with_warmup", t_max="10ba"), "scheduler.t_max"),
    "constant_with_warmup-tok": (_sched("constant_with_warmup", t_warmup="512tok"), "scheduler"),
    "inv_sqrt-t_max-tok": (_sched("inv_sqrt_with_warmup", t_max="20480tok"), "scheduler"),
    # issue 34: the t_max warning says why the LR is 0 for half the run (it was the zero-LR warning, naming scheduler)
    "wsd-ends-at-half": (_sched("warmup_stable_decay", t_warmup="0ba", t_decay="0.25dur", t_max="0.5dur"),
                         "scheduler.t_max"),
    "plateau-base-zero": (_sched("reduce_lr_on_plateau", base={"name": "step", "step_size": "0.001dur"}),
                          "scheduler.base.step_size"),
    "plateau-check-0": (_sched("reduce_lr_on_plateau", monitor="loss/train/total", check_interval="0.001dur"),
                        "scheduler.check_interval"),
    "plateau-check-tok": (_sched("reduce_lr_on_plateau", monitor="loss/train/total", check_interval="1000tok"),
                          "scheduler.check_interval"),
    "plateau-check-long": (_sched("reduce_lr_on_plateau", monitor="loss/train/total", check_interval="41ba"),
                           "scheduler.check_interval"),
    "plateau-eval-long": ({"eval_interval": "50ba", **_sched("reduce_lr_on_plateau")}, "eval_interval"),
    "plateau-min_lr-nan": (_sched("reduce_lr_on_plateau", min_lr=[math.nan]), "scheduler.min_lr[0]"),
    "plateau-factor-1": (_sched("reduce_lr_on_plateau", factor=1.0), "scheduler.factor"),
    "plateau-mode": (_sched("reduce_lr_on_plateau", mode="minimum"), "scheduler.mode"),
    "plateau-patience-neg": (_sched("reduce_lr_on_plateau", patience=-1), "scheduler.patience"),
    "plateau-monitor-typo": (_sched("reduce_lr_on_plateau", monitor="metrics/eval/LanguageCrossEntropi"),
                             "scheduler.monitor"),
    "torch-type-typo": (_sched("torch_lr_scheduler", type="StepLr"), "scheduler.type"),
    "torch-step_size-text": (_sched("torch_lr_scheduler", step_size="x"), "scheduler.step_size"),
    "stages-override-list": (_sched("stages", override_decay=[1]), "scheduler.override_decay"),
    "stages-empty": (_sched("stages", stages=[]), "scheduler.stages"),
    "stages-shape": (_sched("stages", stages=[{"duration": "1dur", "shape": "cube", "end": 0.1}]),
                     "scheduler.stages[0].shape"),
    # -- the optimizer block -------------------------------------------------------------------------------------
    **{
        f"optimizer-lr-{tag}": ({"optimizer": {"name": "decoupled_adamw", "lr": value}}, "optimizer.lr")
        for tag, value in [("nan", math.nan), ("inf", math.inf), ("negative", -1e-3), ("zero", 0), ("text", "abc"),
                           ("bool", True), ("list", [1e-3]), ("none-string", "None")]
    },
    # -- callbacks -----------------------------------------------------------------------------------------------
    **{
        f"guard-quarantine-{tag}": ({"callbacks": {"checkpoint_guard": {"quarantine_folder": value}}},
                                    "callbacks.checkpoint_guard.quarantine_folder")
        for tag, value in [("nul", "q\0x"), ("long", "q" * 300), ("dot", "."), ("dotdot", "../q"), ("abs", "/tmp/q"),
                           ("home", "~/q"), ("url", "s3://b/q"), ("empty", ""), ("space", " q"), ("newline", "q\n")]
    },
    "guard-verify": ({"callbacks": {"checkpoint_guard": {"verify": "crc"}}}, "callbacks.checkpoint_guard.verify"),
    "guard-exit": ({"callbacks": {"checkpoint_guard": {"exit_if_finished": "yes"}}},
                   "callbacks.checkpoint_guard.exit_if_finished"),
    "guard-stale-nan": ({"callbacks": {"checkpoint_guard": {"stale_after": math.nan}}},
                        "callbacks.checkpoint_guard.stale_after"),
    "guard-stale-zero": ({"callbacks": {"checkpoint_guard": {"stale_after": 0}}},
                         "callbacks.checkpoint_guard.stale_after"),
    "guard-heartbeat-neg": ({"callbacks": {"checkpoint_guard": {"heartbeat_interval": -1}}},
                            "callbacks.checkpoint_guard.heartbeat_interval"),
    "guard-heartbeat-vs-stale": ({"callbacks": {"checkpoint_guard": {"stale_after": 10}}},
                                 "callbacks.checkpoint_guard"),
    "guard-unknown": ({"callbacks": {"checkpoint_guard": {"quarantine": "q"}}},
                      "callbacks.checkpoint_guard.quarantine"),
    "guard-not-mapping": ({"callbacks": {"checkpoint_guard": [1]}}, "callbacks.checkpoint_guard"),
    # -- issue 34: the corpus's last cases ---------------------------------------------------------------------
    **{
        f"guard-quarantine-named-{tag}": ({"save_folder": "runs/x", **_guard(quarantine_folder=name)},
                                          "callbacks.checkpoint_guard.quarantine_folder")
        for tag, name in [("latest", "latest-rank0.pt"), ("checkpoint", "ep0-ba10-rank0.pt"),
                          ("nested", "ep0-ba10-rank0.pt/q"), ("pt", "old.pt")]
    },
    "guard-quarantine-named-custom": ({"save_folder": "runs/x", "save_filename": "step{batch}.ckpt",
                                       **_guard(quarantine_folder="step3.ckpt")},
                                      "callbacks.checkpoint_guard.quarantine_folder"),
    **{
        f"guard-save_filename-{suffix}": ({"save_folder": "runs/x",
                                           "save_filename": f"ba{{batch}}-rank{{rank}}.pt.{suffix}", **_guard()},
                                          "save_filename")
        for suffix in ("lz4", "gz", "tar", "zst")
    },
    "guard-without-save_folder": (_guard(), "callbacks.checkpoint_guard"),
    "plateau-min_lr-text": (_sched("reduce_lr_on_plateau", min_lr="abc"), "scheduler.min_lr"),
    "wsd-t_max-before-end": (_sched("warmup_stable_decay", t_max="30ba", t_decay="5ba", alpha_f=0.1),
                             "scheduler.t_max"),
    "power-t_max-before-end": (_sched("power", t_max="0.5dur", alpha_f=0.0), "scheduler.t_max"),
    "plateau-base-wsd-t_max-before-end": (_sched("reduce_lr_on_plateau", base={"name": "warmup_stable_decay",
                                                                                "t_max": "20ba", "alpha_f": 0.1}),
                                          "scheduler.base.t_max"),
    "exponential-gamma-above-1": (_sched("exponential", gamma=1.01, decay_period="10ba"), "scheduler.gamma"),
    "torch-exponentiallr-gamma-above-1": (_sched("torch_lr_scheduler", type="ExponentialLR", step_size=None,
                                                 gamma=1.001), "scheduler.gamma"),
    "plateau-mode-max-on-eval-loss": (_sched("reduce_lr_on_plateau", mode="max"), "scheduler.mode"),
    "plateau-mode-max-on-train-loss": (_sched("reduce_lr_on_plateau", mode="max", monitor="loss/train/total",
                                              check_interval="10ba"), "scheduler.mode"),
    "plateau-mode-min-on-accuracy": (_sched("reduce_lr_on_plateau", monitor="metrics/eval/TokenAccuracy"),
                                     "scheduler.mode"),
    "plateau-callback-without-scheduler": ({"callbacks": {"reduce_lr_on_plateau": {}}},
                                           "callbacks.reduce_lr_on_plateau"),
    "lr_monitor-key": ({"callbacks": {"lr_monitor": {"every": 1}}}, "callbacks.lr_monitor.every"),
    "speed_monitor-typo": ({"callbacks": {"speed_monitor": {"window": 10}}}, "callbacks.speed_monitor.window"),
    "early_stopper-missing": ({"callbacks": {"early_stopper": {"patience": 1}}}, "callbacks.early_stopper.monitor"),
    "callback-typo": ({"callbacks": {"checkpoint_gaurd": {}}}, "callbacks.checkpoint_gaurd"),
    "callbacks-list": ({"callbacks": ["lr_monitor"]}, "callbacks"),
}  # fmt: skip

# Valid, unusual on purpose: each gives exit 0. Many are the constructions of Composer's own scheduler tests
# (tests/optim/test_scheduler.py), torch's (test_optim / lr_scheduler), llm-foundry's (tests/optim).
FAMILY_GOOD: dict[str, dict[str, Any]] = {
    "composer-step": _sched("step", step_size="5ba", gamma=0.5),
    "composer-multistep": _sched("multistep", milestones=["3ba", "6ba"], gamma=0.5),
    "composer-multistep-empty": _sched("multistep", milestones=[]),
    "composer-multistep_with_warmup-empty": _sched("multistep_with_warmup", t_warmup="10ba", milestones=[]),
    "composer-multistep-unsorted": _sched("multistep", milestones=["20ba", "10ba"]),
    "composer-constant-short": _sched("constant", alpha=0.5, t_max="10ba"),
    "composer-linear-half": _sched("linear", alpha_i=1.0, alpha_f=0.5, t_max="0.5dur"),
    "composer-exponential": _sched("exponential", gamma=0.5),
    "composer-exponential-gamma-1": _sched("exponential", gamma=1.0),
    "composer-cosine-short": _sched("cosine", t_max="9ba"),
    "composer-cosine-restarts": _sched("cosine_with_restarts", t_0="5ba", t_mult=1.5),
    "composer-polynomial": _sched("polynomial", power=0.5, t_max="10ba"),
    "composer-polynomial_with_warmup-zero-warmup": _sched("polynomial_with_warmup", t_warmup="0ba"),
    "foundry-constant_with_warmup-0": _sched("constant_with_warmup", t_warmup="0ba"),
    "foundry-cosine_with_warmup-dur": _sched("cosine_with_warmup", t_warmup="0.1dur", alpha_f=0.1),
    "foundry-linear_decay-1dur": _sched("linear_decay_with_warmup", t_warmup="0.5dur", t_max="1dur"),
    "foundry-inv_sqrt-no-cooldown": _sched("inv_sqrt_with_warmup", t_cooldown="0ba"),
    "foundry-inv_sqrt-long-t_max": _sched("inv_sqrt_with_warmup", t_max="100ba"),
    "torch-steplr": _sched("torch_lr_scheduler", type="StepLR", step_size=1, gamma=0.9),
    "torch-exponential": {"scheduler": {"name": "torch_lr_scheduler", "type": "ExponentialLR", "gamma": 0.9}},
    "torch-constant-factor": {"scheduler": {"name": "torch_lr_scheduler", "type": "ConstantLR", "factor": 0.5,
                                            "total_iters": 4}},
    "torch-cosine-tmax-1": {"scheduler": {"name": "torch_lr_scheduler", "type": "CosineAnnealingLR", "T_max": 1}},
    "torch-onecycle": {"scheduler": {"name": "torch_lr_scheduler", "type": "OneCycleLR", "max_lr": 1.0,
                                     "total_steps": 40}},
    "torch-polynomial": {"scheduler": {"name": "torch_lr_scheduler", "type": "PolynomialLR", "total_iters": 4,
                                       "power": 1.0}},
    "wsd-no-warmup-no-decay": _sched("warmup_stable_decay", t_warmup="0ba", t_decay="0ba"),
    "wsd-all-warmup": _sched("warmup_stable_decay", t_warmup="32ba", t_decay="8ba", alpha_f=1.0),
    "wsd-tokens": {"max_duration": "10240tok", **_sched("warmup_stable_decay", t_warmup="1024tok", t_decay="0.2dur")},
    "stages-single-cosine": _sched("stages", stages=[{"duration": "1dur", "shape": "cosine", "end": 0.0}]),
    "plateau-defaults": _sched("reduce_lr_on_plateau"),
    "plateau-train-10ba": _sched("reduce_lr_on_plateau", monitor="loss/train/total", check_interval="10ba"),
    "plateau-train-tok-multiple": _sched("reduce_lr_on_plateau", monitor="loss/train/total",
                                         check_interval="1024tok"),
    "plateau-min_lr-list": _sched("reduce_lr_on_plateau", min_lr=[0.0]),
    "optimizer-lr-large": {"optimizer": {"name": "decoupled_adamw", "lr": 10.0}},
    "optimizer-lr-int": {"optimizer": {"name": "decoupled_adamw", "lr": 1}},
    "guard-nested-quarantine": {"save_folder": "runs/x", **_guard(quarantine_folder="broken/partial")},
    "guard-fast-heartbeat": {"save_folder": "runs/x", **_guard(stale_after=3, heartbeat_interval=0.5)},
    "guard-quarantine-like-a-name": {"save_folder": "runs/x", **_guard(quarantine_folder="pt-quarantine")},
    "guard-save_filename-plain": {"save_folder": "runs/x", "save_filename": "ba{batch}-rank{rank}.pt", **_guard()},
    "wsd-t_max-at-end": _sched("warmup_stable_decay", t_max="40ba"),
    "wsd-t_max-after-end": _sched("warmup_stable_decay", t_max="60ba", alpha_f=0.1),
    "exponential-gamma-below-1": _sched("exponential", gamma=0.999, decay_period="1ba"),
    "plateau-mode-max-on-accuracy": _sched("reduce_lr_on_plateau", mode="max", monitor="metrics/eval/TokenAccuracy"),
}  # fmt: skip


# -- issue 21's whole-run LR cases -----------------------------------------------------------------------------------

RUN_LR_BASE: dict[str, Any] = tiny_train_config()
TRAIN_LOSS = {"name": "reduce_lr_on_plateau", "monitor": "loss/train/total"}

# id -> (changes to RUN_LR_BASE, the field named, a fragment of the line, "error" or "warning")
RUN_LR_BAD: dict[str, tuple[dict[str, Any], str, str, str]] = {
    "wsd-t_max-0dur": (
        {"scheduler": {"name": "warmup_stable_decay", "t_warmup": "0ba", "t_decay": "0ba", "t_max": "0.001dur"}},
        "scheduler.t_max", "converts to 0 batches", "error",
    ),
    "wsd_periods-peak-1e30": (
        {"scheduler": {"name": "wsd_periods", "t_warmup": "2ba", "t_decay": "2ba", "periods": ["20ba", "40ba"],
                       "peaks": [1, 1e30]}},
        "scheduler", "x optimizer.lr (more than 1000x); check scheduler.peaks[1]", "error",
    ),
    "step-gamma-1e308": (
        {"scheduler": {"name": "step", "step_size": "2ba", "gamma": 1e308}},
        "scheduler", "the LR is not finite; check scheduler.gamma", "error",
    ),
    "step-step_size-0": (
        {"scheduler": {"name": "step", "step_size": "0.001dur"}}, "scheduler.step_size", "converts to 0", "error"
    ),
    "exponential-decay_period-0": (
        {"scheduler": {"name": "exponential", "gamma": 0.9, "decay_period": "0.001dur"}},
        "scheduler.decay_period", "converts to 0", "error",
    ),
    "cosine-t_max-0": ({"scheduler": {"name": "cosine", "t_max": "0.001dur"}}, "scheduler.t_max", "converts to 0",
                       "error"),
    "inv_sqrt-tok-in-batch-run": (
        {"scheduler": {"name": "inv_sqrt_with_warmup", "t_warmup": "4ba", "t_scale": "4ba", "t_cooldown": "4ba",
                       "t_max": "20480tok"}},
        "scheduler", "cannot be compared", "error",
    ),
    "constant_with_warmup-t_max-short": (
        {"scheduler": {"name": "constant_with_warmup", "t_warmup": "2ba", "t_max": "10ba"}},
        "scheduler.t_max", "shorter than the run", "error",
    ),
    "constant_with_warmup-tok-warmup": (
        {"scheduler": {"name": "constant_with_warmup", "t_warmup": "512tok"}},
        "scheduler", "cannot be compared", "error",
    ),
    "cosine_with_warmup-half": (
        {"scheduler": {"name": "cosine_with_warmup", "t_warmup": "2ba", "t_max": "0.5dur"}},
        "scheduler.t_max", "shorter than the run", "error",
    ),
    "linear_decay_with_warmup-half": (
        {"scheduler": {"name": "linear_decay_with_warmup", "t_warmup": "2ba", "t_max": "0.5dur"}},
        "scheduler.t_max", "shorter than the run", "error",
    ),
    "polynomial_with_warmup-half": (
        {"scheduler": {"name": "polynomial_with_warmup", "t_warmup": "2ba", "t_max": "0.5dur"}},
        "scheduler.t_max", "shorter than the run", "error",
    ),
    "plateau-base-step-0": (
        {"scheduler": {"name": "reduce_lr_on_plateau", "base": {"name": "step", "step_size": "0.001dur"}}},
        "scheduler.base.step_size", "converts to 0", "error",
    ),
    "optimizer-lr-nan": ({"optimizer": {"name": "decoupled_adamw", "lr": float("nan")}}, "optimizer.lr",
                         "expected a finite number > 0", "error"),
    "optimizer-lr-text-nan": ({"optimizer": {"name": "decoupled_adamw", "lr": "nan"}}, "optimizer.lr",
                              "'nan' is not allowed", "error"),
    "optimizer-lr-negative": ({"optimizer": {"name": "decoupled_adamw", "lr": -0.001}}, "optimizer.lr",
                              "-0.001 is not allowed", "error"),
    "optimizer-lr-zero": ({"optimizer": {"name": "decoupled_adamw", "lr": 0}}, "optimizer.lr", "0 is not allowed",
                          "error"),
    "plateau-check_interval-0": (
        {"scheduler": {**TRAIN_LOSS, "check_interval": "0.001dur"}},
        "scheduler.check_interval", "never checks its monitor", "warning",
    ),
    "plateau-check_interval-tok": (
        {"scheduler": {**TRAIN_LOSS, "check_interval": "1000tok"}},
        "scheduler.check_interval", "is never a multiple of 256 tok", "warning",
    ),
    "plateau-check_interval-longer": (
        {"scheduler": {**TRAIN_LOSS, "check_interval": "50ba"}},
        "scheduler.check_interval", "is longer than the run", "warning",
    ),
    "plateau-eval_interval-longer": (
        {"eval_interval": "100ba", "scheduler": {"name": "reduce_lr_on_plateau"}},
        "eval_interval", "never evaluates", "warning",
    ),
    "cosine_with_warmup-alpha_f-1e6": (
        {"scheduler": {"name": "cosine_with_warmup", "t_warmup": "2ba", "alpha_f": 1e6}},
        "scheduler", "the LR is 1e+06 x optimizer.lr (more than 1000x); check scheduler.alpha_f", "error",
    ),
    "linear-alpha_i-inf": (
        {"scheduler": {"name": "linear", "alpha_i": 5000.0}},
        "scheduler", "5000 x optimizer.lr (more than 1000x); check scheduler.alpha_i", "error",
    ),
    "wsd-ends-at-half-the-run": (
        {"scheduler": {"name": "warmup_stable_decay", "t_warmup": "0ba", "t_decay": "0.25dur", "t_max": "0.5dur"}},
        "scheduler.t_max", "the last 20 batches train at alpha_f (0)", "warning",  # issue 34: says why the LR is 0
    ),
}  # fmt: skip


# -- the table -------------------------------------------------------------------------------------------------------


def _one_table() -> dict[str, Bad]:
    rows: dict[str, Bad] = {}

    def add(case: str, row: Bad, section: str) -> None:
        # a row named as one of an earlier section (a near twin, on another base) keeps its own, suffixed name
        rows[case if case not in rows else f"{case}-{section}"] = row

    for case, (changes, field, fragment) in HAND_BAD.items():
        kind = "warning" if "longer than the run" in fragment else "error"
        add(case, Bad(hand_config(changes), field, fragment, kind), "hand")
    for case, (changes, field, fragment) in FSDP2_BAD.items():
        add(case, Bad(hand_config(changes), field, fragment, "error", ranks=2), "fsdp2")
    for case, (changes, field) in FAMILY_BAD.items():
        add(case, Bad(changed(FAMILY_BASE, changes), field), "family")
    for case, (changes, field, fragment, kind) in RUN_LR_BAD.items():
        add(case, Bad(changed(RUN_LR_BASE, changes), field, fragment, kind), "run-lr")
    assert len(rows) == len(HAND_BAD) + len(FSDP2_BAD) + len(FAMILY_BAD) + len(RUN_LR_BAD)
    return rows


def _good() -> dict[str, dict[str, Any]]:
    rows = {case: hand_config(changes) for case, changes in HAND_GOOD.items()}
    for case, changes in {**FAMILY_GOOD, **{f"minimal-{name}": _sched(name) for name in MINIMAL}}.items():
        rows[case if case not in rows else f"{case}-family"] = changed(FAMILY_BASE, changes)
    assert len(rows) == len(HAND_GOOD) + len(FAMILY_GOOD) + len(MINIMAL)
    return rows


BAD: dict[str, Bad] = _one_table()
GOOD: dict[str, dict[str, Any]] = _good()
