"""A finished run relaunched ends before anything is built: ``checkpoint_guard``'s early exit, as a config transform.

A requeued job whose run has already finished used to build the tokenizer, the dataloaders, the model and the
Trainer, load the checkpoint, and only then learn (``CheckpointGuard.after_load``) that there was nothing to train.
:func:`finished_run_transform` (entry-point group ``llmfoundry_config_transforms``, run at the start of llm-foundry's
``train()``, before any of those) decides it from the save folder instead, where that can be known for sure, and
ends every rank with status 0 and one line. It applies only to a run that lists ``callbacks.checkpoint_guard`` with
``exit_if_finished`` (the default), sets ``autoresume: true`` and has a ``save_folder``; any other config is returned
untouched, with nothing read and nothing initialised.

The rule is the guard's own, on the checkpoint autoresume would load: the run has finished when

1. the local save folder needs no repair (:func:`foundry_ext.trainer.checkpoint_guard.recovery.plan` finds the
   newest checkpoint ``save_filename`` names complete, nothing newer, ``latest`` pointing at it) and no live run owns
   the folder (:func:`foundry_ext.checkpoint.owner.live_owner`), so the guard at ``BEFORE_LOAD`` would change nothing;
2. that checkpoint's saved timestamp, read with the bounded reader
   (:func:`foundry_ext.checkpoint.load_checkpoint_safely`: a ``.pt`` file, or a sharded folder's ``.metadata`` and
   byte ranges; no code from the file is run), has ``batch == max_duration`` with ``max_duration`` in batches.

Where it cannot be known for sure, one line says why and the run goes on to today's path (the guard at
``BEFORE_LOAD``/``AFTER_LOAD`` decides after the load): ``max_duration`` not in batches (an epoch's or a token
count's batches are known only once the dataloader is built); a remote ``save_folder`` (``s3://``...); a checkpoint
past ``max_duration`` (``max_duration`` changed since it was saved); a checkpoint whose timestamp cannot be read. A
folder that needs the guard's repairs, or is owned by a live run, also goes to today's path, where the guard reports
what it does.

Every rank decides identically: the process group is initialised here (``composer.utils.dist.initialize_dist``, the
call llm-foundry makes next, which then finds it done), global rank 0 reads the folder, and its verdict is broadcast.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from foundry_ext._exit import exit_run
from foundry_ext.catalog.callbacks import FIELD, UNCHECKED_SUFFIXES, CheckpointGuardConfig
from foundry_ext.checkpoint.owner import live_owner
from foundry_ext.config.base import build
from foundry_ext.trainer.checkpoint_guard.recovery import Layout, plan

__all__ = ["FINISHED", "finished_run_transform"]

log = logging.getLogger(__name__)

FINISHED = "this run has finished training; exiting with status 0"
_UNSURE = f"{FIELD}: cannot tell before building the model whether this run has finished"
_DEFAULT_FILENAME = "ep{epoch}-ba{batch}-rank{rank}.pt"


def finished_run_transform(cfg: dict[str, Any]) -> dict[str, Any]:
    """llm-foundry config transform: exit 0 before anything is built when the run has finished (module docstring).

    The config is returned unchanged when the run goes on.
    """
    settings = _settings(cfg)
    if settings is None:
        return cfg
    folder, run_name, guard = settings
    if "://" in folder:  # known from the config alone: every rank says the same without reading anything
        if os.environ.get("RANK", "0") == "0":
            log.warning("%s (save_folder %s is remote); the Trainer loads the checkpoint and decides", _UNSURE, folder)
        return cfg
    from composer.utils import dist, get_device

    # the call llm-foundry's train() makes right after the transforms (_initialize_dist_with_barrier); it then
    # finds the process group made and goes on
    dist.initialize_dist(get_device(None), timeout=float(cfg.get("dist_timeout", 600.0)))
    verdict: list[Any] = [(False, None)]
    if dist.get_global_rank() == 0:
        try:
            verdict[0] = _decide(cfg, folder, run_name, guard, dist.get_world_size())
        except Exception as e:  # the early look must never stop a run: today's path decides
            why = " ".join(f"{type(e).__name__}: {e}".split())  # one line
            verdict[0] = (False, f"{_UNSURE} ({why}); the Trainer loads the checkpoint and decides")
    if dist.get_world_size() > 1:
        dist.broadcast_object_list(verdict, src=0)
    finished, line = verdict[0]
    if finished:
        log.warning(line)  # on every rank: each rank's own log says why it ended
        exit_run(0)  # SystemExit(0); on a launched rank no interpreter finalisation (foundry_ext/_exit.py)
    if line and dist.get_global_rank() == 0:
        log.warning(line)
    return cfg


def _settings(cfg: Mapping[str, Any]) -> tuple[str, str, CheckpointGuardConfig] | None:
    """``(save_folder, run_name, guard settings)`` when the early exit applies to ``cfg``, else ``None``."""
    callbacks = cfg.get("callbacks")
    if not isinstance(callbacks, Mapping) or "checkpoint_guard" not in callbacks:
        return None
    try:  # a bad block is reported by the pre-flight and by the guard itself, not here
        guard = build(CheckpointGuardConfig, callbacks.get("checkpoint_guard") or {}, FIELD)
    except Exception:
        return None
    folder = cfg.get("save_folder")
    run_name = cfg.get("run_name") or os.environ.get("RUN_NAME")
    if (
        not guard.exit_if_finished
        or cfg.get("autoresume") is not True
        or cfg.get("save_weights_only") is True  # no training state to resume: autoresume is off (llm-foundry)
        or not isinstance(folder, str)
        or not isinstance(run_name, str)
        or not run_name
    ):
        return None
    return folder, run_name, guard


def _decide(
    cfg: Mapping[str, Any], folder: str, run_name: str, guard: CheckpointGuardConfig, world_size: int
) -> tuple[bool, str | None]:
    """Global rank 0's verdict: ``(finished, the line to print or None)``."""
    from composer.core import Time, TimeUnit
    from composer.utils import format_name_with_dist

    from foundry_ext.checkpoint import CheckpointError, load_checkpoint_safely
    from foundry_ext.trainer.checkpoint_guard.integrity import problem

    layout = _layout(cfg, Path(format_name_with_dist(folder, run_name)), run_name, guard, world_size)
    if layout is None or layout.latest is None or live_owner(layout.folder, guard.stale_after):
        return False, None  # the guard reports (a refused save_filename, a live owner) or has nothing to check
    result = plan(layout, problem=lambda path: problem(path, full=guard.verify == "full"))
    if result.resume is None or result.actions or result.note:
        return False, None  # a fresh start, or the guard's repairs come first and it decides after the load
    max_duration = Time.from_input(cfg.get("max_duration"), TimeUnit.EPOCH)
    latest = layout.folder / layout.latest
    where = f"{latest} -> {os.readlink(latest)}"
    if max_duration.unit != TimeUnit.BATCH:
        return False, (
            f"{_UNSURE} (max_duration {cfg.get('max_duration')} is not in batches: its batches are known once the "
            f"dataloader is built); the Trainer loads {where} and decides"
        )
    try:
        timestamp = load_checkpoint_safely(result.resume)["state"]["timestamp"]["Timestamp"]
        batch = timestamp["batch"]
    except (CheckpointError, KeyError, TypeError) as e:
        return False, f"{_UNSURE} ({where}: no readable timestamp: {e}); the Trainer loads it and decides"
    if type(batch) is not int:
        return False, f"{_UNSURE} ({where}: its timestamp's batch is {batch!r}); the Trainer loads it and decides"
    if batch < max_duration.value:
        return False, None  # the run resumes: nothing to say
    if batch > max_duration.value:
        return False, (
            f"{_UNSURE} ({where} is at {batch}ba, past max_duration {max_duration}: max_duration changed since it was "
            "saved); the Trainer loads it and decides"
        )
    return True, (
        f"{FIELD}: {where} is at {batch}ba, max_duration is {max_duration}: {FINISHED} before building the model (set "
        f"{FIELD}.exit_if_finished: false to let Trainer.fit() raise instead)"
    )


def _layout(
    cfg: Mapping[str, Any], folder: Path, run_name: str, guard: CheckpointGuardConfig, world_size: int
) -> Layout | None:
    """The save folder's naming as the guard's ``_layout`` derives it from the Trainer, here from the config."""
    from composer.utils import format_name_with_dist

    filename = str(cfg.get("save_filename") or _DEFAULT_FILENAME)
    if filename.endswith(UNCHECKED_SUFFIXES):
        return None
    fsdp = cfg.get("fsdp_config")
    # llm-foundry drops fsdp_config on one process ("Reverting to DDP"): the checkpoints are then monolithic
    sharded = isinstance(fsdp, Mapping) and fsdp.get("state_dict_type", "full") == "sharded" and world_size > 1
    if sharded:
        assert isinstance(fsdp, Mapping)
        prefix = str(fsdp.get("sharded_ckpt_prefix_dir") or "ep{epoch}-ba{batch}")
        filename = (Path(filename).parent / prefix).as_posix()
    latest = cfg.get("save_latest_filename") or ("latest-sharded-rank{rank}" if sharded else "latest-rank{rank}.pt")
    keep = cfg.get("save_num_checkpoints_to_keep", -1)
    try:
        return Layout(
            folder=folder,
            name=format_name_with_dist(filename, run_name).removeprefix("./"),
            sharded=sharded,
            latest=None if keep == 0 else format_name_with_dist(str(latest), run_name),
            quarantine=guard.quarantine_folder,
        )
    except ValueError:  # a name the guard cannot list: it says so at BEFORE_LOAD
        return None
