"""Everything about a train YAML's schedule that can be checked before a model is built, in one pass.

Used by ``foundry-ext validate`` and, during training, by llm-foundry itself: :func:`preflight_transform` is registered
in the ``llmfoundry_config_transforms`` entry-point group, so llm-foundry runs it on the resolved config before it
builds the tokenizer, the model or the data. It checks:

* the ``scheduler`` block: its name, every key of every scheduler this package models (its own, Composer's by name,
  llm-foundry's four built-ins), nested blocks (``base``, torch children) included;
* what needs the run length: units that cannot be converted, warmup and decay that overlap, Composer's ``t_max``
  rule, OneCycleLR's ``total_steps``, and a warmup longer than the run (a warning: the run still trains);
* the ``callbacks`` block: this package's callbacks' keys, llm-foundry's built-in callbacks' key names, a plateau
  callback listed without the plateau scheduler;
* a ``reduce_lr_on_plateau`` monitor: its evaluator label against the eval loaders, its metric against what the
  configured llm-foundry model family reports;
* ``fsdp_config`` (FSDP1's keys and values, or FSDP2's) and the checkpoint the run will load against the run's
  FSDP and world size (:mod:`foundry_ext.catalog.fsdp`).

Nothing here imports torch or Composer. It never rejects what it does not know (other plugins' schedulers and
callbacks, models of other families): those are left to llm-foundry.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Mapping
from typing import Any

from foundry_ext.catalog.batch_size import check_batch_size_schedule
from foundry_ext.catalog.callback_checks import check_callbacks, check_checkpoint_guard
from foundry_ext.catalog.findings import Findings
from foundry_ext.catalog.fsdp import check_fsdp
from foundry_ext.catalog.monitor import check_monitor
from foundry_ext.catalog.registry import (
    SCHEDULE_MODELS,
    foreign_scheduler_names,
    validate_block,
)
from foundry_ext.config.durations import UnknownBatchesPerEpoch, parse
from foundry_ext.config.errors import ConfigError, Problem, not_a_scheduler, stop_run
from foundry_ext.config.notices import warn_once
from foundry_ext.config.train_yaml import drop_null_scheduler_keys, run_clock
from foundry_ext.schedules.base import ScheduleModel, run_check
from foundry_ext.schedules.run_lr import likely_mistakes, plateau_interval_warning, run_lr_findings, setting_warnings

__all__ = ["check_train_config", "known_scheduler_names", "preflight_transform"]


def check_train_config(
    cfg: Mapping[str, Any],
    *,
    batches_per_epoch: int | None = None,
    samples_per_batch: int | None = None,
    tokens_per_batch: int | None = None,
    world_size: int = 1,
) -> Findings:
    """Every problem of ``cfg``'s schedule and callbacks that can be found without building anything."""
    found = Findings()
    try:
        found.clock = run_clock(
            cfg,
            batches_per_epoch=batches_per_epoch,
            samples_per_batch=samples_per_batch,
            tokens_per_batch=tokens_per_batch,
            world_size=world_size,
        )
    except ConfigError as e:
        found.errors += e.problems
    block = cfg.get("scheduler")
    name = block.get("name") if isinstance(block, Mapping) else None
    if block is None:
        found.errors.append(
            Problem("scheduler", "missing; add e.g. scheduler: {name: warmup_stable_decay, t_warmup: 100ba}")
        )
    elif not isinstance(block, Mapping) or not name:
        found.errors.append(
            Problem("scheduler.name", "missing; expected a block with a name, e.g. {name: cosine_with_warmup}")
        )
    else:
        found.scheduler = _check_scheduler(dict(block), found)
    check_callbacks(cfg.get("callbacks"), name, found)
    _, ramp_problems, ramp_notes = check_batch_size_schedule(cfg, world_size)
    found.errors += [p for p in ramp_problems if p not in found.errors]  # callbacks' keys: checked once above
    found.notes += ramp_notes
    check_checkpoint_guard(cfg, found)
    found.errors += check_fsdp(cfg, world_size=world_size)  # fsdp_config, and the checkpoint the run will load
    _check_optimizer_lr(cfg, found)
    if isinstance(found.scheduler, ScheduleModel) and found.scheduler.name == "reduce_lr_on_plateau":
        check_monitor(found.scheduler, cfg, found)
        _check_plateau_intervals(found.scheduler, cfg, found)
    return found


def known_scheduler_names() -> list[str]:
    """Every scheduler name a train YAML may use here: this package's, llm-foundry's, other plugins'."""
    names = set(SCHEDULE_MODELS) | set(foreign_scheduler_names())
    if "llmfoundry.registry" in sys.modules:  # in training, or with code_paths: names registered in Python too
        names |= set(sys.modules["llmfoundry.registry"].schedulers.get_all())
    return sorted(names)


def _check_scheduler(block: dict[str, Any], found: Findings) -> ScheduleModel | None:
    name = block["name"]
    names = known_scheduler_names()
    if name not in names:
        found.errors.append(Problem("scheduler.name", not_a_scheduler(name, names)))
        return None
    try:
        model = validate_block(block, "scheduler")
    except ConfigError as e:
        found.errors += e.problems
        _check_run_without(block, e.problems, found)
        return None
    if model is None:
        found.notes.append(f"scheduler {name!r} comes from another package: its keys are checked when it is built")
        return None
    _check_run(model, "scheduler", found)
    base = getattr(model, "base", None)
    if isinstance(base, Mapping):
        if base["name"] not in names:
            found.errors.append(Problem("scheduler.base.name", not_a_scheduler(base["name"], names)))
            return None
        base_model = validate_block(base, "scheduler.base")  # valid: the plateau model checked it
        if base_model is not None:
            _check_run(base_model, "scheduler.base", found)
    return model


def _check_run_without(block: dict[str, Any], problems: list[Problem], found: Findings) -> None:
    """Still check the run with the keys that are valid, so that one bad key does not hide another problem.

    The keys a problem names are dropped (their defaults take their place); the run is checked only when no dropped
    key is a duration, since a default duration could report an overlap the user's config does not have.
    """
    bad = {p.field.removeprefix("scheduler.").split(".")[0].split("[")[0] for p in problems}
    if not bad or "" in bad or "name" in bad or "scheduler" in bad:
        return
    model_cls = SCHEDULE_MODELS.get(block["name"])
    if model_cls is None or any(
        k in model_cls.model_fields and "Duration" in str(model_cls.model_fields[k].annotation) for k in bad
    ):
        return
    try:
        model = validate_block({k: v for k, v in block.items() if k not in bad}, "scheduler")
    except ConfigError:
        return  # a cross-field problem among the valid keys: already reported with the first validation
    if model is not None:
        _check_run(model, "scheduler", found)


def _check_run(model: ScheduleModel, path: str, found: Findings) -> None:
    found.warnings += setting_warnings(model, path)
    clock = found.clock
    if clock is None:
        return
    try:
        check = run_check(model, clock.max_duration, clock.batches_per_epoch, 1.0, path)
    except UnknownBatchesPerEpoch:
        found.notes.append(
            f"{path}: durations in 'ep' (or max_duration in 'ep') need the batches per epoch, which the YAML does not "
            "say (no local MDS dataset index); the checks that need the run length were skipped "
            "(`foundry-ext validate --batches-per-epoch N` makes them)"
        )
        return
    found.errors += check.errors
    found.warnings += check.warnings
    if not check.errors:  # the whole run's LR (foundry_ext/schedules/run_lr.py): 0-batch durations, LR sweep
        errors, warnings = run_lr_findings(model, clock, path)
        found.errors += errors
        found.warnings += [w for w in warnings if w not in found.warnings]
        found.notes += [f"warning (valid, but likely a mistake): {p}" for p in likely_mistakes(model, path)]


def _check_optimizer_lr(cfg: Mapping[str, Any], found: Findings) -> None:
    """``optimizer.lr`` must be a finite positive number: every schedule multiplies it."""
    optimizer = cfg.get("optimizer")
    if not isinstance(optimizer, Mapping) or "lr" not in optimizer:
        return
    lr = optimizer["lr"]
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
        shown = repr(lr) if isinstance(lr, (int, float, str)) and not isinstance(lr, bool) else str(lr).lower()
        found.errors.append(
            Problem("optimizer.lr", f"{shown} is not allowed; expected a finite number > 0, e.g. 6.0e-4")
        )


def _check_plateau_intervals(model: ScheduleModel, cfg: Mapping[str, Any], found: Findings) -> None:
    """A plateau whose checks never fire in the run: one warning each (check_interval, eval_interval)."""
    clock = found.clock
    if clock is None:
        return
    interval = getattr(model, "check_interval", None)
    if interval is not None:
        warning = plateau_interval_warning(interval, clock, "scheduler.check_interval")
        if warning is not None:
            found.warnings.append(warning)
        return
    eval_interval = cfg.get("eval_interval", 1)
    try:
        parsed = parse(eval_interval if isinstance(eval_interval, str) else f"{int(eval_interval)}ep")
    except (ValueError, TypeError):
        return
    warning = plateau_interval_warning(parsed, clock, "eval_interval")
    if warning is not None:
        found.warnings.append(
            Problem("eval_interval", f"{warning.message.replace('never checks its monitor', 'never evaluates')}")
        )


def preflight_transform(cfg: dict[str, Any]) -> dict[str, Any]:
    """llm-foundry config transform: stop a bad schedule before anything is built; the config is returned unchanged.

    Every error is reported at once (one line each) as a :class:`ConfigError`; a warmup longer than the run is one
    warning line.
    """
    text = os.environ.get("WORLD_SIZE", "1") or "1"
    world_size = int(text) if text.isdigit() and int(text) >= 1 else 1  # the launcher's; a bad one is its to report
    drop_null_scheduler_keys(cfg)  # as the tools do: `scheduler={name: x, t_decay: null}` unsets t_decay
    found = check_train_config(cfg, world_size=world_size)
    if found.errors:
        stop_run(found.errors)
    for warning in found.warnings:
        warn_once(str(warning))
    return cfg
