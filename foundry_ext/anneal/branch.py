"""The branch's plan: the stable run's config, checked against its checkpoint, decaying from batch ``s``.

:func:`plan_branch` decides everything and writes nothing (:mod:`.write` writes the YAML). The branch is the stable
run's config (overrides merged, interpolations resolved) with: ``load_path`` the resolved checkpoint, ``save_folder``
and ``run_name`` its own, ``autoresume: true`` (a killed branch relaunched with the same command resumes from its own
latest checkpoint: Composer loads the save folder's latest when there is one, else ``load_path``), ``max_duration``
``s + LEN`` batches, and ``warmup_stable_decay`` with ``t_decay_start: {s}ba``. The checks it makes are in
:mod:`.checks`, the schedule it writes in :mod:`.schedule`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from foundry_ext.anneal.checks import (
    branch_folder,
    check_budget,
    check_out,
    check_out_outside_stable,
    check_plain_name,
    check_same_run,
    override,
)
from foundry_ext.anneal.keep import KEPT_FOLDER
from foundry_ext.anneal.options import AnnealError, parse_decay, parse_floor, parse_shape
from foundry_ext.anneal.ramp import last_lr, ramp_branch
from foundry_ext.anneal.schedule import branch_knobs_in_overrides, branch_lrs, branch_scheduler
from foundry_ext.anneal.source import Source, read_source
from foundry_ext.config.train_yaml import load_train_config

__all__ = ["Branch", "plan_branch"]


@dataclass
class Branch:
    """A planned branch: the YAML to write and what to print."""

    config: dict[str, Any]
    source: Source
    length: int
    shape: str
    floor: float
    folder: str
    run_name: str
    first_lr: float
    last_lr: float
    notes: list[str] = field(default_factory=list)
    kept: Path | None = None  # where the source is kept in the branch's folder (None: a remote save folder)
    rotates: bool = False  # the stable run's save_num_checkpoints_to_keep > 0: it deletes old checkpoints

    @property
    def end(self) -> int:
        """The branch's ``max_duration`` in batches: ``s + LEN``."""
        return self.source.batch + self.length


def plan_branch(
    checkpoint: str,
    config_path: str,
    overrides: Sequence[str],
    decay: str,
    shape: str = "linear",
    floor: str = "0",
    out: str | None = None,
) -> Branch:
    """Decide the branch of ``checkpoint`` that decays over ``decay``; nothing is written.

    Raises:
        AnnealError: one line naming the option, the file or the key, the value and what is allowed.
        ConfigError: CONFIG cannot be loaded (missing, invalid YAML, a bad override), its problems as they are.
    """
    length_of = parse_decay(decay)
    alpha = parse_floor(floor)
    shape = parse_shape(shape)
    if out is not None:
        check_out(out, config_path)
    own = ("save_folder", "run_name")  # the branch's: the stable run's values are read from the file
    # a ConfigError goes up as it is: the CLI says it as every command says a config's problem
    cfg = load_train_config(config_path, [o for o in overrides if o.partition("=")[0].strip() not in own])
    source = read_source(checkpoint)
    if out is not None:
        check_out_outside_stable(out, source)
    s = source.batch
    if s == 0:
        raise AnnealError(f"CHECKPOINT {checkpoint}: at batch 0 (nothing trained); branch from a later checkpoint")
    check_same_run(cfg, source, checkpoint)
    if source.sharded and not cfg.get("fsdp_config"):
        raise AnnealError(
            f"CONFIG {config_path}: no fsdp_config, but CHECKPOINT {checkpoint} is sharded (FSDP: a .metadata and a "
            "file per rank), which loads only into an FSDP run; expected the stable run's YAML, with its fsdp_config"
        )
    ramp = None  # a batch_size_schedule run's branch is planned in the decay's units (anneal/ramp.py)
    if source.ramp is not None:
        ramp = ramp_branch(cfg, source.ramp, s, source.samples, source.tokens, length_of.duration, decay)
        length = ramp.length
    else:
        length = length_of.batches(s, source.tokens_per_batch, source.samples_per_batch)
        check_budget(cfg, source, s, length, decay)
    peak, lr = source.peaks[0], source.lrs[0]
    if alpha * peak > lr:
        raise AnnealError(
            f"--floor {floor}: the floor {alpha:g} x the peak LR {peak:.6g} = {alpha * peak:.6g} is above the "
            f"checkpoint's LR {lr:.6g} (batch {s}); expected a floor <= {lr / peak:.6g}"
        )
    if lr != (peak if ramp is None else peak * ramp.factor):  # a ramp's stable phase: the peak times its stage's
        raise AnnealError(
            f"CHECKPOINT {checkpoint}: batch {s} trains at LR {lr:.6g} = {source.multiplier:.6g} x the peak "
            f"{peak:.6g}, inside a warmup or a decay: a branch decays from the peak, so its LR would jump back up at "
            f"batch {s + 1}; branch from a checkpoint of the stable phase (a branch of a branch only at its first "
            "checkpoint, before its decay)"
        )
    stable_name = source.run_name or str(cfg.get("run_name") or "run")
    run_name = override(overrides, "run_name") or f"{stable_name}-anneal-{s}ba-{length}ba-{shape}" + (
        f"-floor{alpha:g}" if alpha else ""
    )
    check_plain_name(run_name, override(overrides, "run_name") is not None, stable_name, checkpoint)
    if run_name == stable_name:
        raise AnnealError(
            f"run_name={run_name}: the stable run's name; a branch needs its own (run_name= and save_folder= among "
            "the overrides name the branch's: leave the stable run's out)"
        )
    folder = branch_folder(cfg, overrides, source, run_name)
    if ramp is None:
        scheduler = branch_scheduler(cfg, source, shape, alpha)
        first, last = branch_lrs(scheduler, source, length)
    else:
        scheduler = ramp.scheduler(shape, alpha)
        first, last = lr, last_lr({**cfg, "max_duration": ramp.max_duration, "scheduler": scheduler})
    branch_cfg = dict(cfg)
    branch_cfg.update(
        run_name=run_name,
        load_path=str(source.path),
        save_folder=folder,
        autoresume=True,
        max_duration=f"{s + length}ba" if ramp is None else ramp.max_duration,
        scheduler=scheduler,
    )
    if branch_cfg.get("load_weights_only"):
        branch_cfg["load_weights_only"] = False
    notes = []
    keep = cfg.get("save_num_checkpoints_to_keep")
    rotates = isinstance(keep, int) and not isinstance(keep, bool) and keep > 0
    kept = None if "://" in folder else Path(folder) / KEPT_FOLDER / source.path.name
    if kept is not None:
        branch_cfg["load_path"] = str(kept)
    notes.extend(branch_knobs_in_overrides(cfg, overrides, shape, alpha))
    if source.sharded:
        notes.append(_sharded_note(source))
    return Branch(branch_cfg, source, length, shape, alpha, folder, run_name, first, last, notes, kept, rotates)


def _sharded_note(source: Source) -> str:
    """How to train a branch of a sharded checkpoint: the launch that loads it (FSDP, on as many ranks as wrote it)."""
    n = len(list(source.path.glob("__*_0.distcp")))
    ranks = f"{n} rank" + ("s" if n != 1 else "")
    return (
        f"note: a sharded checkpoint (FSDP, written by {ranks}): the branch keeps the stable run's fsdp_config; "
        "train it with FSDP as the stable run was (Composer's default FSDP on GPUs; with FSDP_VERSION=2, torch's "
        f"FSDP2, on CPU too), on {ranks} for the planned run's exact batches (docs/resume.md: other world sizes)"
    )
