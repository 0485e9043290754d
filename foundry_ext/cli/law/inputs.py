"""What ``law predict`` and ``law tune`` share: LAW.json, the YAML's LR of every batch, warnings, output paths."""

from __future__ import annotations

from typing import TYPE_CHECKING

from foundry_ext.cli import UsageError, read_metrics

if TYPE_CHECKING:
    import numpy as np

    from foundry_ext.preview.pipeline import LRPipeline

__all__ = [
    "MAX_BATCHES",
    "NO_CUTS",
    "PLATEAU",
    "PLATEAU_CUT_KEYS",
    "check_scheduler_name",
    "law_notes",
    "read_law",
    "warn",
    "yaml_lrs",
]


def read_law(path: str):
    """The LAW.json; its notes are printed by :func:`law_notes` once the other inputs have passed."""
    from foundry_ext.law.lawfile import LawFileError, read_law_file

    try:
        return read_law_file(path)
    except LawFileError as e:
        raise UsageError(str(e)) from None


def law_notes(law, path: str) -> None:
    """One line on how far the law is to be trusted: not checked (an older file), a hand-edited verdict, not good.

    Printed after every input was read, so that a bad input is still answered by its one error line alone.
    """
    import sys

    if law.edited:
        print(f"warning: {law.edited}", file=sys.stderr)
    elif law.verdict is None:
        print(f"note: {path} was not checked (written before `law fit` checked its fits): no verdict, no band; "
              "fit again for them", file=sys.stderr)  # fmt: skip
    elif law.verdict != "good":
        print(f"warning: this law's verdict is {law.verdict}: {law.reason}", file=sys.stderr)


def warn(lines: list[str], strict: bool) -> None:
    """Each line as a ``warning:`` on stderr; with ``--strict`` the first is the usage error instead."""
    import sys

    for line in lines:
        if strict:
            raise UsageError(f"--strict: {line}")
        print(f"warning: {line}", file=sys.stderr)


def check_scheduler_name(config: str, overrides: list[str]) -> str | None:
    """A misspelt scheduler.name, answered with a did-you-mean before the LR pipeline imports Composer; the name."""
    from foundry_ext.catalog.preflight import known_scheduler_names
    from foundry_ext.config.errors import ConfigError, not_a_scheduler
    from foundry_ext.config.train_yaml import load_train_config, run_clock

    try:
        cfg = load_train_config(config, list(overrides))
    except ConfigError as e:
        raise UsageError.of_config(e) from None
    block = cfg.get("scheduler")
    name = block.get("name") if isinstance(block, dict) else None
    if isinstance(name, str):
        names = known_scheduler_names()
        if name not in names:
            raise UsageError.of_config(ConfigError("scheduler.name", not_a_scheduler(name, names)))
    try:
        total = run_clock(cfg).total_batches
    except Exception:  # the pipeline names the problem itself
        return name if isinstance(name, str) else None
    if total is not None and total > MAX_BATCHES:
        raise UsageError(f"max_duration: {total:,} batches; law predict and tune take at most {MAX_BATCHES:,}")
    return name if isinstance(name, str) else None


PLATEAU = "reduce_lr_on_plateau"
# its keys that decide the cuts, from the monitored eval losses: a law's prediction has no losses to cut on
PLATEAU_CUT_KEYS = ("monitor", "mode", "factor", "patience", "threshold", "threshold_mode", "cooldown", "min_lr",
                    "min_scale", "eps", "check_interval")  # fmt: skip
NO_CUTS = (
    f"scheduler {PLATEAU}: predicted without its cuts (they come from the eval losses the run will log): the LR as "
    "if the loss never plateaued"
)


MAX_BATCHES = 10_000_000  # the LR of every batch is held in memory (80 MB at this length)


def yaml_lrs(config: str, overrides: list[str], metrics_path: str | None = None) -> tuple[np.ndarray, LRPipeline]:
    """The LR of every batch of a train YAML and its pipeline (:func:`foundry_ext.law.predict.yaml_pipeline`).

    Raises:
        UsageError: the YAML, its schedule or ``--metrics`` is refused (one line).
    """
    from foundry_ext.config.durations import UnknownBatchesPerEpoch
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.law.predict import yaml_pipeline
    from foundry_ext.preview.pipeline import ScheduleError

    metrics = read_metrics(metrics_path) if metrics_path else None
    try:
        pipeline = yaml_pipeline(config, overrides, metrics)
        return pipeline.lrs(), pipeline
    except UnknownBatchesPerEpoch:
        raise UsageError("max_duration or a scheduler duration is in 'ep': give it in batches ('ba')") from None
    except ConfigError as e:
        raise UsageError.of_config(e) from None
    except ScheduleError as e:
        raise UsageError(str(e)) from None
