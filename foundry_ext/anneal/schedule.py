"""The branch's scheduler block (``warmup_stable_decay``, decaying from the checkpoint's batch), first and last LR."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from foundry_ext.anneal.checks import override
from foundry_ext.anneal.options import AnnealError
from foundry_ext.anneal.source import Source
from foundry_ext.config.durations import DurationError, parse

__all__ = ["branch_knobs_in_overrides", "branch_lrs", "branch_scheduler", "stable_scheduler", "warmup_of"]


def stable_scheduler(cfg: Mapping[str, Any]) -> Mapping[str, Any]:
    """The stable run's ``scheduler`` block as the merged config holds it (empty when it has none)."""
    block = cfg.get("scheduler")
    return block if isinstance(block, Mapping) else {}


def warmup_of(cfg: Mapping[str, Any], source: Source) -> dict[str, Any]:
    """The stable run's warmup keys, in batches (only the LRs before ``s`` use them: plots, the resume check)."""
    block = stable_scheduler(cfg)
    keys: dict[str, Any] = {}
    value = block.get("t_warmup")
    try:
        warmup = parse(value) if isinstance(value, str) else None
    except DurationError:
        warmup = None
    per = {"ba": 1, "tok": source.tokens_per_batch, "sp": source.samples_per_batch}
    if warmup is not None and per.get(warmup.unit) and int(warmup.value) % per[warmup.unit] == 0:
        keys["t_warmup"] = f"{min(int(warmup.value) // per[warmup.unit], source.batch)}ba"
    if block.get("name") == "warmup_stable_decay":
        for key in ("warmup_type", "alpha_i"):
            if key in block:
                keys[key] = block[key]
    return keys


def branch_knobs_in_overrides(cfg: Mapping[str, Any], overrides: Sequence[str], shape: str, alpha: float) -> list[str]:
    """A note for each ``scheduler.decay_type=`` or ``scheduler.alpha_f=`` override unlike ``--shape``, ``--floor``.

    Overrides describe the stable run (its scheduler block is replaced), so such a value does not reach the branch,
    while it reads as if it should. The value compared is the one the merged config holds, as llm-foundry reads it
    (``5e-1`` is ``0.5``; ``scheduler.decay_type=null`` unsets the key: nothing to say), for keys an override names.
    """
    block = stable_scheduler(cfg)
    notes = []
    for key, option, used, shown in (
        ("decay_type", "--shape", shape, shape),
        ("alpha_f", "--floor", alpha, f"{alpha:g}"),
    ):
        if override(overrides, f"scheduler.{key}") is not None and key in block and block[key] != used:
            notes.append(
                f"note: scheduler.{key}={block[key]} is read as the stable run's (its scheduler block is replaced); "
                f"the branch uses {option} {shown}"
            )
    return notes


def branch_scheduler(cfg: Mapping[str, Any], source: Source, shape: str, alpha: float) -> dict[str, Any]:
    """``warmup_stable_decay`` with the stable run's warmup, decaying from the checkpoint's batch to ``alpha``."""
    return {
        "name": "warmup_stable_decay",
        **warmup_of(cfg, source),
        "t_decay_start": f"{source.batch}ba",
        "decay_type": shape,
        "alpha_f": alpha,
    }


def branch_lrs(block: Mapping[str, Any], source: Source, length: int) -> tuple[float, float]:
    """The branch's LR at its first batch (``s``, the checkpoint's) and its last (``s + LEN - 1``), group 0.

    The last is the checkpoint's peak LR (a resumed run keeps the checkpoint's base LR) times the multiplier the LR
    pipeline gives that batch for the branch's block and ``max_duration`` (what ``plot`` shows of the branch's YAML).

    Raises:
        ConfigError: the branch's block is refused (as the key it came from).
    """
    from foundry_ext.config.train_yaml import run_clock
    from foundry_ext.preview.pipeline import LRPipeline

    cfg = {"max_duration": f"{source.batch + length}ba", "scheduler": dict(block)}
    pipeline = LRPipeline.from_config(cfg, run_clock(cfg), check_name=False, read_lr=False)
    last = source.peaks[0] * pipeline.multiplier(source.batch + length - 1)
    first = source.lrs[0]
    if not math.isfinite(last):
        raise AnnealError("the branch's LR is not finite")
    return first, last
