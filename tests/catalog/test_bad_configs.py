"""A corpus of bad configs: each one stops before training, in a line that names its field; valid ones pass.

Every case is checked twice: by ``foundry-ext validate`` (exit 2, a line ``<file>: <field>: ...``, no Python error
text), and by llm-foundry's own ``train_from_yaml`` (the real training entry point, in this process): our pre-flight
config transform refuses it with a ``ConfigError`` naming the same field, before llm-foundry builds the tokenizer, the
model or the data. Warnings (a warmup longer than the run) are problems for ``validate`` and one line when training
starts (``tests/catalog/test_preflight.py``).
"""

from __future__ import annotations

import re
import traceback
from pathlib import Path
from typing import Any

import pytest

from foundry_ext.cli import main
from foundry_ext.config.errors import ConfigError
from tests.support.configs import changed, tiny_train_config, write_train_yaml
from tests.support.launcher import REPO

BASE: dict[str, Any] = tiny_train_config(max_duration="100ba")


def S(**block: Any) -> dict[str, Any]:
    """A config whose scheduler block is ``block``."""
    return {"scheduler": block}


def T(type_: str, **kwargs: Any) -> dict[str, Any]:
    return S(name="torch_lr_scheduler", type=type_, **kwargs)


def P(**kwargs: Any) -> dict[str, Any]:
    return S(name="reduce_lr_on_plateau", **kwargs)


SEQ = [{"type": "LinearLR", "start_factor": 0.1, "total_iters": 10}, {"type": "CosineAnnealingLR", "T_max": 90}]
NAN, INF = float("nan"), float("inf")

# id -> (changes to BASE, the field the line must name, a fragment of the message)
BAD: dict[str, tuple[dict[str, Any], str, str]] = {
    # -- top level --------------------------------------------------------------------------------------------
    "max_duration-missing": ({"max_duration": None}, "max_duration", "missing"),
    "max_duration-text": ({"max_duration": "abc"}, "max_duration", "not a duration"),
    "max_duration-zero": ({"max_duration": "0ba"}, "max_duration", "must be > 0"),
    "max_duration-dur": ({"max_duration": "1dur"}, "max_duration", "'dur' is relative"),
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
}

# Issue 42, what needs FSDP2 on 2 ranks: checked with FSDP_VERSION=2 and `validate --world-size 2`, and through
# llm-foundry's train_from_yaml with WORLD_SIZE=2 (the config transforms run before it starts a process group).
# id -> (changes to BASE, the field the line must name, a fragment of the message)
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
}

# Valid configs, which must pass (Composer defaults, llm-foundry defaults, units Composer converts).
GOOD: dict[str, dict[str, Any]] = {
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


def make_config(tmp_path: Path, changes: dict[str, Any], name: str = "cfg.yaml") -> Path:
    cfg = changed(BASE, changes)
    if isinstance(cfg.get("train_loader"), dict) or "ep" in str(cfg.get("max_duration")):
        cfg["train_loader"] = {
            "name": "text",
            "drop_last": True,
            "dataset": {"local": str(REPO / "demo-data"), "split": "train"},
        }
    return write_train_yaml(tmp_path / name, cfg)


def test_the_corpus_is_large_and_covers_every_family() -> None:
    assert len(BAD) >= 100
    blocks = [changes.get("scheduler", {}) for changes, _, _ in BAD.values()]
    names = {b.get("name") for b in blocks if isinstance(b, dict)}
    assert {"warmup_stable_decay", "step", "torch_lr_scheduler", "reduce_lr_on_plateau", "cosine_with_warmup"} <= names


@pytest.mark.parametrize("case", list(BAD))
def test_validate_names_the_field(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    changes, field, fragment = BAD[case]
    config = make_config(tmp_path, changes)
    rc = main(["validate", str(config), "--strict"])  # a warning names its field too
    out, err = capsys.readouterr()
    assert rc == 2, out + err
    lines = [line.removeprefix(f"{config}: ") for line in err.splitlines()]
    named = [line for line in lines if re.match(rf"(warning: )?{re.escape(field)}: ", line)]
    assert named, f"no line names {field}:\n{err}"
    assert any(fragment in line for line in named), f"{fragment!r} not in:\n{err}"
    assert "Traceback" not in err and not re.search(r"\b(TypeError|AttributeError|KeyError|ZeroDivisionError)\b", err)


@pytest.mark.parametrize("case", [c for c, (_, _, fragment) in BAD.items() if "longer than the run" not in fragment])
def test_llm_foundry_training_refuses_it_before_building_anything(case: str, tmp_path: Path) -> None:
    """llm-foundry's own ``train_from_yaml``: our config transform raises before tokenizer, model or data exist."""
    from llmfoundry.command_utils import train_from_yaml

    changes, field, fragment = BAD[case]
    config = make_config(tmp_path, changes)
    with pytest.raises(ConfigError) as raised:
        train_from_yaml(str(config), [])
    frames = [frame.f_code.co_name for frame, _ in traceback.walk_tb(raised.value.__traceback__)]
    assert "preflight_transform" in frames  # not the scheduler's own build: nothing was built before it
    assert "build_tokenizer" not in frames and "build_composer_model" not in frames
    lines = str(raised.value).splitlines()
    assert any(line.startswith(f"{field}: ") and fragment in line for line in lines), str(raised.value)


@pytest.mark.parametrize("case", list(FSDP2_BAD))
def test_fsdp2_on_two_ranks_names_the_field(
    case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``foundry-ext validate --world-size 2`` under FSDP_VERSION=2, then llm-foundry's train_from_yaml on 2 ranks."""
    from llmfoundry.command_utils import train_from_yaml

    changes, field, fragment = FSDP2_BAD[case]
    config = make_config(tmp_path, changes)
    monkeypatch.setenv("FSDP_VERSION", "2")
    assert main(["validate", str(config), "--world-size", "2"]) == 2
    err = capsys.readouterr().err
    named = [line.removeprefix(f"{config}: ") for line in err.splitlines()]
    assert any(line.startswith(f"{field}: ") and fragment in line for line in named), err
    assert main(["validate", str(config), "--world-size", "2"]) == 2  # twice: nothing was moved or changed
    capsys.readouterr()
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError) as raised:
        train_from_yaml(str(config), [])
    frames = [frame.f_code.co_name for frame, _ in traceback.walk_tb(raised.value.__traceback__)]
    assert "preflight_transform" in frames and "build_composer_model" not in frames
    assert any(line.startswith(f"{field}: ") and fragment in line for line in str(raised.value).splitlines())


@pytest.mark.parametrize("case", list(GOOD))
def test_valid_configs_pass(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = make_config(tmp_path, GOOD[case])
    rc = main(["validate", str(config)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert out.splitlines()[-1].startswith("OK: ")


@pytest.mark.parametrize("path", sorted((REPO / "yamls").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_yaml_passes(
    path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)  # the tiny examples read ./demo-data's index for the batches per epoch
    assert main(["validate", str(path)]) == 0, capsys.readouterr().err


def test_epochs_without_a_known_dataset_size_are_a_note_not_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = make_config(tmp_path, {"max_duration": "2ep", **S(name="exponential", gamma=0.99)})
    text = config.read_text().replace(str(REPO / "demo-data"), str(tmp_path / "nowhere"))
    config.write_text(text)
    assert main(["validate", str(config)]) == 0
    out = capsys.readouterr().out
    assert "note: scheduler: durations in 'ep'" in out and "--batches-per-epoch" in out
    assert main(["validate", str(config), "--batches-per-epoch", "10"]) == 0


def test_all_problems_of_a_file_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    changes = {
        **S(name="warmup_stable_decay", decay_tpye="sqrt", alpha_f=1.5, t_warmup="2.5ba"),
        "callbacks": {"lr_monitr": {}, "reduce_lr_on_plateau": {}},
    }
    config = make_config(tmp_path, changes)
    assert main(["validate", str(config)]) == 2
    out, err = capsys.readouterr()
    fields = sorted(line.split(": ")[1] for line in err.splitlines())
    assert fields == [
        "callbacks.lr_monitr",
        "callbacks.reduce_lr_on_plateau",
        "scheduler.alpha_f",
        "scheduler.decay_tpye",
        "scheduler.t_warmup",
    ]
    assert "FAILED: 5 problems" in out


def test_a_bad_key_does_not_hide_a_problem_of_the_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """alpha_f and a typo are invalid; the valid durations still overlap in a 30-batch run: three lines."""
    changes = {
        "max_duration": "30ba",
        **S(name="warmup_stable_decay", t_warmup="20ba", t_decay="0.5dur", alpha_f=1.5, decay_tpye="sqrt"),
    }
    config = make_config(tmp_path, changes)
    assert main(["validate", str(config)]) == 2
    err = capsys.readouterr().err
    assert sorted(line.split(": ")[1] for line in err.splitlines()) == [
        "scheduler.alpha_f",
        "scheduler.decay_tpye",
        "scheduler.t_decay",
    ]
    assert "(= 20 + 15 > 30 ba)" in err
