"""A train YAML's ``batch_size_schedule``: every problem before the first batch, and the config llm-foundry trains.

llm-foundry 0.22 refuses unknown top-level keys (``Unused parameters [...]``) but runs the registered config
transforms first (``llmfoundry.utils.config_utils.make_dataclass_and_log_config``). :func:`batch_size_transform`
(entry point ``llmfoundry_config_transforms``) takes the top-level ``batch_size_schedule`` block out and puts it where
llm-foundry builds it, visibly in the logged config:

* ``callbacks.batch_size_schedule``: the same keys; the callback (``foundry_ext.trainer.batch_size``) scales the LR
  and tells the loader the stage of every batch;
* ``train_loader.name: text`` becomes ``text_batch_ramp``: llm-foundry's ``text`` loader whose batches are whole
  groups of the first stage's batches (``foundry_ext.trainer.batch_size``).

``callbacks.batch_size_schedule`` may also be written directly (with ``train_loader.name: text``). Nothing here
imports torch, Composer or llm-foundry.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from foundry_ext.config.base import build
from foundry_ext.config.errors import ConfigError, Problem, stop_run
from foundry_ext.config.train_yaml import mds_batches_per_epoch
from foundry_ext.schedules.batch_size import FIELD, BatchPlan, BatchSizeSchedule, plan_of

__all__ = ["CALLBACK", "LOADER", "batch_size_transform", "check_batch_size_schedule"]

#: ``callbacks.<CALLBACK>``: where the transform puts the schedule.
CALLBACK = "batch_size_schedule"
#: ``train_loader.name`` of the ramped ``text`` loader.
LOADER = "text_batch_ramp"
_RAMPABLE = ("text", LOADER)


def _block_of(cfg: Mapping[str, Any]) -> tuple[Any, str, list[Problem]]:
    """The schedule block, its YAML path, and a problem when it is given twice."""
    top = cfg.get(FIELD)
    callbacks = cfg.get("callbacks")
    nested = callbacks.get(CALLBACK) if isinstance(callbacks, Mapping) else None
    if top is not None and nested is not None:
        return top, FIELD, [Problem(FIELD, f"given twice (also as callbacks.{CALLBACK}); allowed: one of the two")]
    if top is not None:
        return top, FIELD, []
    return nested, f"callbacks.{CALLBACK}", []


def _tokens_per_sample(cfg: Mapping[str, Any]) -> int | None:
    value = cfg.get("max_seq_len")
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def check_batch_size_schedule(
    cfg: Mapping[str, Any], world_size: int = 1
) -> tuple[BatchPlan | None, list[Problem], list[str]]:
    """The plan of ``cfg``'s ramp (None without one), every problem (one line each), and notes.

    Checked: the keys (a point in batches, an unknown ``lr_scaling``), batches that are not whole multiples of
    ``global_train_batch_size``, points out of order or repeated, a batch ``world_size`` ranks cannot divide, a train
    loader other than llm-foundry's streaming ``text`` (the only one whose position is restored exactly from the
    samples trained), and a largest batch above the samples of one epoch (from a local MDS index).
    """
    block, path, problems = _block_of(cfg)
    if block is None:
        return None, [], []
    if not isinstance(block, Mapping):
        return None, [Problem(path, f"{block!r} is not a block; expected {{stages: [...], lr_scaling: ...}}")], []
    try:
        schedule = build(BatchSizeSchedule, block, path)
    except ConfigError as e:
        return None, [*problems, *e.problems], []
    base = cfg.get("global_train_batch_size")
    if not isinstance(base, int) or isinstance(base, bool) or base < 1:
        return None, [*problems, Problem("global_train_batch_size", f"{base!r}: a ramp needs the first stage's batch, "
                                         "an integer >= 1")], []  # fmt: skip
    plan, more = plan_of(schedule, base, _tokens_per_sample(cfg), path)
    problems += more
    if plan is None:
        return None, problems, []
    for i, size in enumerate(plan.sizes):
        if size % world_size:
            field = "global_train_batch_size" if i == 0 else f"{path}.stages[{i - 1}].global_train_batch_size"
            problems.append(Problem(field, f"{size} cannot be divided among {world_size} ranks; allowed: a multiple "
                                    f"of {world_size}"))  # fmt: skip
    loader = cfg.get("train_loader")
    name = loader.get("name") if isinstance(loader, Mapping) else None
    if name not in _RAMPABLE:
        problems.append(
            Problem(
                "train_loader.name",
                f"{name!r} cannot resume a batch-size ramp exactly; allowed: text (llm-foundry's streaming MDS loader, "
                "which resumes from the samples trained)",
            )
        )
    else:
        found = mds_batches_per_epoch(cfg, world_size, world_size)  # 1 sample per rank and batch: samples per rank
        if found is not None and max(plan.sizes) > found[0] * world_size:
            i = plan.sizes.index(max(plan.sizes)) - 1
            problems.append(
                Problem(
                    f"{path}.stages[{i}].global_train_batch_size",
                    f"{max(plan.sizes)} is more than the {found[0] * world_size} samples of one epoch of "
                    "train_loader.dataset; allowed: at most one epoch's samples",
                )
            )
    notes = [f"{FIELD}: the global batch grows {' -> '.join(map(str, plan.sizes))} samples at samples "
             f"{', '.join(map(str, plan.starts[1:]))}; LR scaling {plan.lr_scaling}"]  # fmt: skip
    return (None if problems else plan), problems, notes


def _world_size() -> int:
    text = os.environ.get("WORLD_SIZE", "1") or "1"
    return int(text) if text.isdigit() and int(text) >= 1 else 1


def batch_size_transform(cfg: dict[str, Any]) -> dict[str, Any]:
    """llm-foundry config transform: check a ramp (a problem stops the run), then move it where it is built."""
    plan, problems, _ = check_batch_size_schedule(cfg, _world_size())
    if problems:
        stop_run(problems)
    if plan is None:
        return cfg
    block = cfg.pop(FIELD, None)
    if block is not None:
        callbacks = cfg.get("callbacks")
        cfg["callbacks"] = {**(callbacks if isinstance(callbacks, Mapping) else {}), CALLBACK: dict(block)}
    cfg["train_loader"] = {**cfg["train_loader"], "name": LOADER}
    return cfg
