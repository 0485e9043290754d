"""Run the range test through llm-foundry's own ``train()`` on a config derived from the user's train YAML.

``train(cfg)`` builds the tokenizer, the train dataloader, the model and the optimizer with llm-foundry's builders,
exactly as ``composer train.py YAML`` does, so every model, dataset and optimizer the YAML names works. The derived
config differs from the user's only where the range test must:

- ``scheduler``: the exponential ramp (:class:`~foundry_ext.lr_find.ramp.ExponentialRampScheduler`);
  ``optimizer.lr``: ``lr_max`` (the ramp's multipliers are ``<= 1``); ``max_duration``: ``batches`` batches;
- ``callbacks``: only the :class:`~foundry_ext.lr_find.recorder.LRFindRecorder`;
- dropped, so that nothing of the user's run is read or written and no run is logged: checkpoints (``save_*``),
  ``load_*`` and ``autoresume``; ``loggers``; the YAML's ``callbacks``; evaluation (``eval_loader(s)``,
  ``icl_tasks``, ``eval_gauntlet``); ``profiler``; ``only_*_checkpoint``. Console output is replaced by the
  recorder's progress line (``progress_bar``, ``log_to_console``, ``log_config`` off; ``python_log_level: warn``),
  and the MosaicML platform logger is disabled (``MOSAICML_PLATFORM=false`` during the run);
- ``code_paths``: dropped after they were imported once by the config loader.

Everything else (model, tokenizer, ``train_loader``, optimizer and its other keys, ``algorithms`` such as gradient
clipping, ``precision``, batch sizes, ``seed``, ``fsdp_config``, ``variables``...) is the YAML's.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from foundry_ext.lr_find.rules import (
    DEFAULT_BETA,
    DEFAULT_LR_MAX,
    DEFAULT_LR_MIN,
    DEFAULT_RULE,
    RULES,
    RuleResult,
    smooth_lr,
    suggest_all,
    suggested_range,
)

__all__ = [
    "FSDP_ONE_PROCESS",
    "IGNORED_KEYS",
    "READINGS",
    "LRFindResult",
    "derive_config",
    "fsdp_unused",
    "ignored_keys",
    "lr_find",
]

# Keys of the user's YAML the range test drops; reported in one line when set.
IGNORED_KEYS = (
    "save_folder",
    "save_interval",
    "save_filename",
    "save_latest_filename",
    "save_overwrite",
    "save_num_checkpoints_to_keep",
    "save_weights_only",
    "save_ignore_keys",
    "load_path",
    "load_weights_only",
    "load_strict_model_weights",
    "load_ignore_keys",
    "autoresume",
    "only_hf_checkpoint",
    "only_composer_checkpoint",
    "loggers",
    "callbacks",
    "profiler",
    "eval_loader",
    "eval_loaders",
    "icl_tasks",
    "icl_tasks_str",
    "eval_gauntlet",
    "eval_gauntlet_str",
    "eval_first",
    "eval_interval",
    "eval_subset_num_batches",
    "icl_subset_num_batches",
    "icl_seq_len",
)
# Reported by name in the "ignored" line when the YAML sets them (the others are their companions).
_REPORTED = (
    "save_folder",
    "load_path",
    "autoresume",
    "loggers",
    "callbacks",
    "eval_loader",
    "eval_loaders",
    "icl_tasks",
    "eval_gauntlet",
    "profiler",
)

READINGS = ("lag-matched", "batch-lr")
_OTHER = {"lag-matched": "batch_lr", "batch-lr": "lag_matched"}
_SCHEDULER_NAME = "foundry_ext_lr_find_ramp"
_CALLBACK_NAME = "foundry_ext_lr_find_recorder"


@dataclass
class LRFindResult:
    """What a range test found. ``lrs[b]``, ``losses[b]``, ``smoothed[b]`` are those of 0-indexed batch ``b``.

    ``read_lrs[b]`` is the LR the smoothed point ``b`` is read at: the lag-matched LR when ``reading`` is
    ``"lag-matched"``, else ``lrs[b]`` (``"batch-lr"``, fastai's and Lightning's reading). ``suggestions`` are
    every rule's in that reading; ``other_suggestions`` in the other one, for comparison.
    """

    lr_min: float
    lr_max: float
    batches: int
    beta: float
    lrs: list[float]
    losses: list[float]
    smoothed: list[float]
    read_lrs: list[float]
    reading: str
    stop_reason: str | None
    rule: str
    suggestions: dict[str, RuleResult]
    other_suggestions: dict[str, RuleResult]
    seconds: float
    world_size: int = 1
    ignored: list[str] = field(default_factory=list)

    @property
    def stopped_early(self) -> bool:
        """Whether divergence stopped the run before ``batches`` batches."""
        return self.stop_reason is not None

    @property
    def batches_run(self) -> int:
        return len(self.losses)

    @property
    def suggested_lr(self) -> float | None:
        """The suggestion of :attr:`rule` (None when its window had fewer than 2 points)."""
        return self.suggestions[self.rule].lr

    @property
    def suggested_range(self) -> tuple[float, float] | None:
        """:func:`~foundry_ext.lr_find.rules.suggested_range` of the suggestion as pasted (None without one)."""
        lr = self.suggested_lr
        return None if lr is None else suggested_range(lr)

    @property
    def min_loss_batch(self) -> int | None:
        finite = [i for i, s in enumerate(self.smoothed) if math.isfinite(s)]
        return min(finite, key=lambda i: self.smoothed[i]) if finite else None

    @property
    def min_loss_lr(self) -> float | None:
        """The LR the minimum of the smoothed loss is read at."""
        i = self.min_loss_batch
        return None if i is None else self.read_lrs[i]

    def to_json(self, yaml_lr: float | None = None) -> dict[str, Any]:
        """The JSON summary (``--json``): the suggestion, each rule's, the stop and the settings; no per-batch data."""
        i, suggested_range = self.min_loss_batch, self.suggested_range
        return {
            "suggested_lr": self.suggested_lr,
            "suggested_range": None if suggested_range is None else list(suggested_range),
            "rule": self.rule,
            "reading": self.reading,
            "suggestions": {name: asdict(r) for name, r in self.suggestions.items()},
            f"suggestions_{_OTHER[self.reading]}": {name: asdict(r) for name, r in self.other_suggestions.items()},
            "min_loss_lr": self.min_loss_lr,
            "min_smoothed_loss": None if i is None else self.smoothed[i],
            "stopped_early": self.stopped_early,
            "stop_reason": self.stop_reason,
            "batches_run": self.batches_run,
            "batches": self.batches,
            "lr_min": self.lr_min,
            "lr_max": self.lr_max,
            "beta": self.beta,
            "yaml_lr": yaml_lr,
            "world_size": self.world_size,
            "seconds": self.seconds,
            "ignored": self.ignored,
        }


def ignored_keys(cfg: Mapping[str, Any]) -> list[str]:
    """The keys the user's config sets that the range test ignores (the main ones, not their companions)."""
    return [k for k in _REPORTED if cfg.get(k) not in (None, False, {}, [], "")]


#: Said once, on rank 0, when :func:`fsdp_unused` (llm-foundry would drop FSDP itself, with a warning of its own).
FSDP_ONE_PROCESS = (
    "lr-find: fsdp_config not used: one process trains the whole model unsharded, as llm-foundry does on one device "
    "(to shard it: FSDP_VERSION=2 on CPU, or on GPUs, .venv/bin/composer -n N .venv/bin/foundry-ext lr-find ...)"
)


def fsdp_unused(cfg: Mapping[str, Any], world_size: int) -> bool:
    """Whether the YAML asks for FSDP and the range test runs in one process, where FSDP has nothing to shard over."""
    return world_size == 1 and cfg.get("fsdp_config") not in (None, {})


def derive_config(
    cfg: Mapping[str, Any],
    lr_min: float,
    lr_max: float,
    batches: int,
    beta: float = DEFAULT_BETA,
    progress: bool = True,
    world_size: int = 1,
) -> tuple[dict[str, Any], list[str]]:
    """The config ``train()`` runs for the range test, and the names of the user's keys it ignores.

    Args:
        cfg: the resolved train config (plain dicts), as :func:`foundry_ext.config.train_yaml.load_train_config`
            returns it.
        lr_min: see :func:`lr_find`.
        lr_max: see :func:`lr_find`.
        batches: see :func:`lr_find`.
        beta: see :func:`lr_find`.
        progress: see :func:`lr_find`.
        world_size: the processes the test runs on; with one, ``fsdp_config`` is dropped (:func:`fsdp_unused`).
    """
    from foundry_ext.lr_find.ramp import ramp_for_batches

    derived = copy.deepcopy(dict(cfg))
    ignored = ignored_keys(cfg)
    for key in (*IGNORED_KEYS, "code_paths"):
        derived.pop(key, None)
    if fsdp_unused(cfg, world_size):
        del derived["fsdp_config"]
    ramp = ramp_for_batches(lr_min, lr_max, batches)
    optimizer = dict(derived.get("optimizer") or {})
    optimizer["lr"] = lr_max
    derived.update(
        optimizer=optimizer,
        scheduler={"name": _SCHEDULER_NAME, "alpha_i": ramp.alpha_i, "t_max": ramp.t_max},
        max_duration=f"{batches}ba",
        callbacks={_CALLBACK_NAME: {"batches": batches, "beta": beta, "progress": progress}},
        progress_bar=False,
        log_to_console=False,
        log_config=False,
        python_log_level="warn",
    )
    return derived, ignored


@contextlib.contextmanager
def _registered() -> Iterator[None]:
    """The ramp and the recorder buildable by name in this process during the run, and gone after it.

    Registered by hand, not as entry points (see docs/cli.md); removed after, so that a process that goes on (a
    notebook, a test session) finds llm-foundry's registry as it was, with no scheduler name it did not install.
    """
    import catalogue
    from llmfoundry import registry

    from foundry_ext.lr_find.ramp import ExponentialRampScheduler
    from foundry_ext.lr_find.recorder import LRFindRecorder

    added = []
    for names, name, func in (
        (registry.schedulers, _SCHEDULER_NAME, ExponentialRampScheduler),
        (registry.callbacks, _CALLBACK_NAME, LRFindRecorder),
    ):
        if name not in names.get_all():
            names.register(name, func=func)
            added.append((*names.namespace, name))
    try:
        yield
    finally:
        for key in added:
            catalogue.REGISTRY.pop(key, None)


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def lr_find(
    cfg: Mapping[str, Any],
    lr_min: float = DEFAULT_LR_MIN,
    lr_max: float = DEFAULT_LR_MAX,
    batches: int = 100,
    beta: float = DEFAULT_BETA,
    rule: str = DEFAULT_RULE,
    reading: str = "lag-matched",
    progress: bool = True,
    callbacks: Mapping[str, Mapping[str, Any]] | None = None,
) -> LRFindResult:
    """Run the LR range test of a resolved train config through llm-foundry's ``train()``.

    Call it on every rank of a distributed run; every rank returns the same result.

    Args:
        cfg: the resolved train config (plain dicts).
        lr_min: LR of batch 0 (and 1: Composer's timing).
        lr_max: LR of batch ``batches - 1``.
        batches: batches of the ramp; the run stops earlier once the smoothed loss diverges.
        beta: EMA smoothing factor.
        rule: the rule whose suggestion is :attr:`LRFindResult.suggested_lr` (one of
            :data:`~foundry_ext.lr_find.rules.RULES`).
        reading: ``"lag-matched"`` (read each smoothed loss at the LRs averaged the same way) or ``"batch-lr"``
            (at the LR of its batch, as fastai and Lightning do); see :mod:`foundry_ext.lr_find.rules`.
        progress: print a progress line on rank 0.
        callbacks: more callbacks, by the name they are registered under with llm-foundry and their kwargs, as in
            a YAML's ``callbacks`` block (tests use one to watch the optimizer).

    Raises:
        TrainLoaderTooShortError: one epoch of the train loader has fewer than ``batches`` batches.
    """
    from composer.utils import dist
    from llmfoundry.command_utils import train
    from omegaconf import OmegaConf

    from foundry_ext.lr_find.recorder import LRFindRecorder
    from foundry_ext.streaming_cleanup import streaming_cleanup

    if rule not in RULES:
        raise ValueError(f"rule: {rule!r} is not one of {', '.join(RULES)}")
    if reading not in READINGS:
        raise ValueError(f"reading: {reading!r} is not one of {', '.join(READINGS)}")
    derived, ignored = derive_config(cfg, lr_min, lr_max, batches, beta, progress, dist.get_world_size())
    derived["callbacks"].update({name: dict(kwargs) for name, kwargs in (callbacks or {}).items()})
    start = time.perf_counter()
    # the ramp stops mid-epoch (or the run raises): its dataset threads and shared memory must not outlive it
    with streaming_cleanup():
        with _registered(), _env(MOSAICML_PLATFORM="false"):
            trainer = train(OmegaConf.create(derived))
        try:
            recorder = next(c for c in trainer.state.callbacks if isinstance(c, LRFindRecorder))
        finally:
            trainer.close()
    matched = smooth_lr(recorder.lrs, beta)
    by_reading = {
        "lag-matched": (matched, suggest_all(matched, recorder.smoothed, batches)),
        "batch-lr": (list(recorder.lrs), suggest_all(recorder.lrs, recorder.smoothed, batches)),
    }
    read_lrs, suggestions = by_reading[reading]
    return LRFindResult(
        lr_min=lr_min,
        lr_max=lr_max,
        batches=batches,
        beta=beta,
        lrs=list(recorder.lrs),
        losses=list(recorder.losses),
        smoothed=list(recorder.smoothed),
        read_lrs=read_lrs,
        reading=reading,
        stop_reason=recorder.stop_reason,
        rule=rule,
        suggestions=suggestions,
        other_suggestions=by_reading["batch-lr" if reading == "lag-matched" else "lag-matched"][1],
        seconds=time.perf_counter() - start,
        world_size=dist.get_world_size(),
        ignored=ignored,
    )
