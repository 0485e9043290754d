"""``foundry-ext validate CONFIG.yaml [key=value ...]``: build the scheduler and callbacks without a model.

Loads the YAML as ``train.py`` does (:mod:`foundry_ext.cli._config_loading`), then builds what ``train()`` would
build for the schedule: the scheduler through llm-foundry's registry, every ``callbacks:`` entry through
``build_callback``, and calls the scheduler at batch 0 and at ``max_duration`` on a minimal ``State``, which runs
the checks that need the run length (for example a WSD warmup and decay that overlap). It reports *every* problem,
one per line, instead of stopping at the first.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import sys
from collections.abc import Mapping
from typing import Any

from foundry_ext._time import format_time
from foundry_ext.cli import UsageError

__all__ = ["add_arguments", "find_problems", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the config, its overrides, and the clock options the first-call checks may need."""
    parser.add_argument("config", metavar="CONFIG.yaml", help="an llm-foundry train YAML")
    parser.add_argument(
        "overrides", nargs="*", metavar="key=value", help="overrides, as for train.py; put them right after CONFIG.yaml"
    )
    parser.add_argument(
        "--batches-per-epoch",
        type=int,
        metavar="N",
        help="batches in one epoch, to check schedules given in 'ep' (the YAML cannot say: it depends on the dataset)",
    )
    parser.add_argument("--tokens-per-batch", type=int, metavar="N", help="tokens per batch, for durations in 'tok'")


def run(args: argparse.Namespace) -> int:
    """Print ``OK: ...`` and return 0, or print every problem on its own line and return 2."""
    from foundry_ext.cli._config_loading import load_train_config

    cfg = load_train_config(args.config, args.overrides)  # an unreadable file is the one problem worth stopping at
    problems, notes, summary = find_problems(cfg, args.batches_per_epoch, args.tokens_per_batch)
    for note in notes:
        print(f"note: {note}")
    if problems:
        for problem in problems:
            print(f"{args.config}: {problem}", file=sys.stderr)
        print(f"FAILED: {len(problems)} problem{'s' if len(problems) != 1 else ''} in {args.config}")
        return 2
    print(f"OK: {summary}")
    return 0


def find_problems(
    cfg: dict[str, Any], batches_per_epoch: int | None = None, tokens_per_batch: int | None = None
) -> tuple[list[str], list[str], str]:
    """Every problem of ``cfg``'s schedule and callbacks, notes about checks skipped, and the OK summary."""
    from foundry_ext.cli import _config_loading as loading

    problems: list[str] = []
    notes: list[str] = []

    def attempt(fn: Any, *a: Any) -> Any:
        try:
            return fn(*a)
        except UsageError as e:
            problems.append(str(e))
            return None

    max_duration = attempt(loading.max_duration, cfg)
    spec = attempt(loading.scheduler_spec, cfg)
    scheduler = attempt(loading.build_scheduler, *spec) if spec else None
    transformed = attempt(loading.apply_transforms, cfg) or cfg
    callbacks = _build_callbacks(cfg.get("callbacks"), transformed, problems)
    if scheduler is not None and max_duration is not None:
        _first_calls(
            scheduler, spec, cfg, max_duration, callbacks, batches_per_epoch, tokens_per_batch, problems, notes
        )
    if scheduler is not None:
        _check_monitor(scheduler, cfg, problems)
    summary = ""
    if spec is not None and max_duration is not None:
        name, kwargs = spec
        n = len(callbacks)
        summary = (
            f"{name} ({loading.summarize(kwargs) or 'defaults'}), max_duration={format_time(max_duration)}, "
            f"{n} callback{'s' if n != 1 else ''}"
        )
    return problems, notes, summary


def _build_callbacks(block: Any, train_config: dict[str, Any], problems: list[str]) -> list[Any]:
    """Build each ``callbacks:`` entry as ``train()`` does; one problem per failing entry."""
    from llmfoundry import registry
    from llmfoundry.utils.builders import build_callback

    from foundry_ext.cli._config_loading import one_line

    if block is None:
        return []
    if not isinstance(block, Mapping):
        problems.append(f"callbacks: expected a mapping of callback name -> settings, got {type(block).__name__}")
        return []
    known = sorted(set(registry.callbacks.get_all()) | set(registry.callbacks_with_config.get_all()))
    built = []
    for name, kwargs in block.items():
        field = f"callbacks.{name}"
        if name not in known:
            close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.5)
            hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
            problems.append(f"{field}: {name!r} is not a registered callback{hint}")
            continue
        if kwargs is not None and not isinstance(kwargs, Mapping):
            problems.append(f"{field}: expected a mapping of settings (or {{}}), got {kwargs!r}")
            continue
        try:
            built.append(build_callback(str(name), copy.deepcopy(dict(kwargs or {})), train_config=train_config))
        except Exception as e:
            message = one_line(e)
            if not message.startswith(field):  # our ConfigErrors already name the field
                message = f"{field}: {type(e).__name__}: {message}"
            problems.append(message)
    return built


def _first_calls(
    scheduler: Any,
    spec: tuple[str, dict],
    cfg: dict[str, Any],
    max_duration: Any,
    callbacks: list[Any],
    batches_per_epoch: int | None,
    tokens_per_batch: int | None,
    problems: list[str],
    notes: list[str],
) -> None:
    """Call the scheduler at batch 0 and at the end, as the Trainer would, to trigger its first-call checks."""
    from foundry_ext._config import ConfigError
    from foundry_ext._schedule_eval import Clock, ScheduleEvaluator, units_used
    from foundry_ext.cli import _config_loading as loading

    name, kwargs = spec
    units = units_used(kwargs) | {max_duration.unit.value}
    tpb = tokens_per_batch or loading.tokens_per_batch(cfg)[0]
    spb = loading.samples_per_batch(cfg)
    missing = [
        why
        for unit, have, why in (
            ("ep", batches_per_epoch, "durations in 'ep' need --batches-per-epoch N"),
            ("tok", tpb, "durations in 'tok' need global_train_batch_size and max_seq_len (or --tokens-per-batch N)"),
            ("sp", spb, "durations in 'sp' need global_train_batch_size"),
        )
        if unit in units and not have
    ]
    if missing:
        notes.append(f"skipped calling the scheduler over the run: {'; '.join(missing)}")
        return
    evaluator = ScheduleEvaluator(scheduler, max_duration, Clock(spb, tpb, batches_per_epoch))
    evaluator.state.callbacks.extend(callbacks)  # the plateau scheduler adopts a listed adapter, as in training
    for batch in (0, evaluator.total_batches):
        try:
            evaluator.at(batch)
        except ConfigError as e:
            problems.append(loading.one_line(e))
            return
        except Exception as e:
            problems.append(f"scheduler ({name}): fails at batch {batch}: {type(e).__name__}: {loading.one_line(e)}")
            return


def _check_monitor(scheduler: Any, cfg: dict[str, Any], problems: list[str]) -> None:
    """A plateau scheduler that monitors an eval metric needs an evaluator with that label."""
    monitor = getattr(scheduler, "monitor", None)
    if monitor is None or getattr(scheduler, "train_monitor", True):
        return
    loaders = cfg.get("eval_loader") or cfg.get("eval_loaders")
    if not loaders and not cfg.get("icl_tasks"):
        problems.append(
            f"scheduler.monitor: {monitor!r} is an eval metric but the config has no eval_loader; add one, or "
            "monitor a train loss: monitor: loss/train/total with check_interval: 100ba"
        )
        return
    if cfg.get("icl_tasks") or not loaders:
        return  # ICL labels come from the task files: not checked here
    if isinstance(loaders, Mapping):
        labels = ["eval"]
    else:
        labels = [f"eval/{loader.get('label')}" for loader in loaders if isinstance(loader, Mapping)]
    label = monitor[len("metrics/") :].rpartition("/")[0]
    if label not in labels:
        problems.append(
            f"scheduler.monitor: {monitor!r} names evaluator {label!r}, but the eval loaders are labelled "
            f"{', '.join(repr(x) for x in labels)} (metrics/<label>/<metric>)"
        )
