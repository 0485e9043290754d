"""``foundry-ext validate CONFIG.yaml [key=value ...]``: every problem of a train YAML, at once.

Loads the YAML as ``train.py`` does, then runs the pre-flight check (:mod:`foundry_ext.catalog.preflight`, the same
code llm-foundry runs before it builds anything), checks the rest of the config as llm-foundry and Composer read it
(:mod:`foundry_ext.catalog.train_config`: top-level keys, MPT model keys, FSDP1 keys and values, autoresume) and
evaluates the schedule over the run (:mod:`foundry_ext.preview`, the LR of the first and the last batch), which runs
the checks the Trainer makes when it first calls the scheduler. Every problem is one line naming its YAML field.

Errors and warnings as ``law`` treats them: an error (the run would stop, or silently not do what its YAML says) exits
2; a warning (it trains, but likely not as meant: a warmup longer than the run, a ``max_duration`` without a unit) is
printed and exits 0, or 2 with ``--strict``. The last line says what was checked.

It imports only what the config uses: nothing heavy for this package's schedulers and llm-foundry's callbacks,
torch for ``torch_lr_scheduler``, Composer and llm-foundry for schedulers this package does not model.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from typing import Any

from foundry_ext.cli import add_config_arguments

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the config, its overrides, and the clock options the run checks may need."""
    add_config_arguments(parser)
    parser.add_argument(
        "--batches-per-epoch",
        type=_positive_int,
        metavar="N",
        help="batches in one epoch, for durations in 'ep' (default: from the local MDS index of train_loader.dataset "
        "and global_train_batch_size, when there is one)",
    )
    parser.add_argument(
        "--tokens-per-batch", type=_positive_int, metavar="N", help="tokens per batch, for durations in 'tok'"
    )
    parser.add_argument(
        "--samples-per-batch", type=_positive_int, metavar="N", help="samples per batch, for durations in 'sp'"
    )
    parser.add_argument(
        "--steps",
        action="store_true",
        help="with a batch_size_schedule: print every step (batch, tokens before it, global batch, stage, LR)",
    )
    parser.add_argument(
        "--world-size",
        type=_positive_int,
        default=1,
        metavar="N",
        help="ranks the run uses (batches per epoch depend on it)",
    )
    parser.add_argument("--strict", action="store_true", help="a warning is an error (exit 2), as for `law`")


def _positive_int(text: str) -> int:
    """An option counting batches, tokens, samples or ranks: an integer >= 1 (``--world-size 0`` has no batches)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer; expected an integer >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; expected an integer >= 1")
    return value


def run(args: argparse.Namespace) -> int:
    """Print ``OK: ...`` and return 0, or print every problem on its own line and return 2."""
    from foundry_ext.catalog.preflight import check_train_config
    from foundry_ext.catalog.train_config import check_train_keys
    from foundry_ext.cli import UsageError
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.config.train_yaml import load_train_config

    try:
        cfg = load_train_config(args.config, args.overrides)  # an unreadable file is the one problem worth stopping at
    except ConfigError as e:
        raise UsageError.of_config(e) from None
    found = check_train_config(
        cfg,
        batches_per_epoch=args.batches_per_epoch,
        samples_per_batch=args.samples_per_batch,
        tokens_per_batch=args.tokens_per_batch,
        world_size=args.world_size,
    )
    key_errors, key_warnings, checked = check_train_keys(cfg)
    problems = [str(p) for p in [*key_errors, *found.errors]]
    warnings = [str(p) for p in [*key_warnings, *found.warnings]]
    if not found.errors and isinstance(cfg.get("scheduler"), Mapping):
        problems += _evaluate(cfg, found, warnings)
    if not problems and not found.errors and _has_ramp(cfg):
        problems += _ramp(cfg, args, found.scheduler)
    for note in found.notes:
        print(f"note: {note}")
    for line in problems:
        print(f"{args.config}: {line}", file=sys.stderr)
    warnings = list(dict.fromkeys(warnings))
    for line in warnings:
        print(f"{args.config}: warning: {line}", file=sys.stderr)
    checked += ["the scheduler block and the LR over the run", "callbacks' keys"]
    print(f"checked: {'; '.join(checked)}")
    total = len(problems) + (len(warnings) if args.strict else 0)
    if total:
        strict = (
            f" (--strict: {len(warnings)} warning{'s' if len(warnings) != 1 else ''} among them)"
            if (args.strict and warnings)
            else ""
        )
        print(f"FAILED: {total} problem{'s' if total != 1 else ''} in {args.config}{strict}")
        return 2
    also = f"; {len(warnings)} warning{'s' if len(warnings) != 1 else ''} (--strict: exit 2)" if warnings else ""
    print(f"OK: {_summary(cfg, found)}{also}")
    return 0


def _evaluate(cfg: dict[str, Any], found: Any, warnings: list[str]) -> list[str]:
    """The LR of the first and the last batch, as the Trainer computes them: runs the scheduler's own checks."""
    from foundry_ext.config.durations import UnknownBatchesPerEpoch
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.config.train_yaml import error_message
    from foundry_ext.preview.pipeline import BatchesPerEpochNeeded, LRPipeline, ScheduleError

    clock = found.clock
    if clock is None:
        return []
    model = found.scheduler
    if model is not None and not model.has_formula:
        # Composer's and llm-foundry's own classes: every check their first call makes is mirrored by the model
        # (run by the pre-flight check above), so validate need not import Composer to call them
        return []
    if model is not None and model.kind == "torch" and _has_ramp(cfg):
        return []  # torch counts steps, and a ramp's are not a fixed batch's: _ramp evaluates every one of them
    try:
        total = clock.total_batches
    except (UnknownBatchesPerEpoch, ConfigError) as e:
        found.notes.append(f"the LR of each batch was not evaluated: {e}")
        return []
    try:
        pipeline = LRPipeline.from_config(cfg, clock, check_name=False, read_lr=False)
    except BatchesPerEpochNeeded:
        return []  # noted by the pre-flight check
    except ConfigError as e:
        return [str(p) for p in e.problems]
    except ScheduleError as e:  # a scheduler of another package failing to build: its own message
        return [f"scheduler ({e.name}): cannot be built: {error_message(e.cause)}"]
    warnings += [str(w) for w in pipeline.warnings]
    problems = []
    for batch in sorted({0, max(total - 1, 0)}):
        try:
            value = pipeline.multiplier(batch)
        except ConfigError as e:
            return [str(p) for p in e.problems]
        except ScheduleError as e:
            return [f"scheduler ({e.name}): fails at batch {batch}: {error_message(e.cause) or 'no message'}"]
        if not math.isfinite(value) or value < 0:
            problems.append(
                f"scheduler: the LR multiplier of batch {batch} is {value!r}; expected a finite number >= 0"
            )
    if not problems and model is not None and model.kind == "torch":
        # torch's classes have no formula on the model: the pre-flight check could not sweep the run; the Trainer's
        # first call makes the same sweep (foundry_ext/trainer/schedulers.py, RunResolver)
        from foundry_ext.schedules.run_lr import stepped_lr_problem

        problem = stepped_lr_problem(model, pipeline.multiplier, total)
        if problem is not None:
            problems.append(str(problem))
    return problems


def _has_ramp(cfg: Mapping[str, Any]) -> bool:
    callbacks = cfg.get("callbacks")
    return cfg.get("batch_size_schedule") is not None or (
        isinstance(callbacks, Mapping) and callbacks.get("batch_size_schedule") is not None
    )


def _ramp(cfg: dict[str, Any], args: argparse.Namespace, model: Any) -> list[str]:
    """A batch-size ramp's stages (and with ``--steps`` every step), as the Trainer will train them; or its problems.

    ``model``: the scheduler block's model (None for a class this package does not model).
    """
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.preview.batch_size import is_plateau, ramp_steps, stage_lines

    try:
        plan, steps = ramp_steps(cfg, args.world_size)
    except ConfigError as e:
        return [str(p) for p in e.problems]
    if model is not None and model.kind == "torch":
        # the sweep the Trainer's first call (and the torch config transform) makes, over the ramp's steps
        from foundry_ext.schedules.run_lr import stepped_lr_problem

        problem = stepped_lr_problem(model, lambda batch: steps[batch].multiplier, len(steps))
        if problem is not None:
            return [str(problem)]
    for line in stage_lines(plan, steps, cfg):
        print(f"ramp: {line}")
    if is_plateau(cfg):
        print(
            "ramp: reduce_lr_on_plateau: the LR shown is the time part (base x warmup) times each stage's factor, "
            "the run's until its first cut; `foundry-ext plot --metrics` replays a past run's cuts"
        )
    if args.steps:
        print("batch,token,sample,global_batch,stage,lr_factor,lr")
        for st in steps:
            print(f"{st.batch},{st.token},{st.sample},{st.size},{st.stage},{st.factor!r},{st.lr!r}")
    return []


def _summary(cfg: dict[str, Any], found: Any) -> str:
    from foundry_ext.config.train_yaml import summarize

    block = dict(cfg["scheduler"])
    name = block.pop("name")
    params = summarize(block, limit=10_000) or "defaults"
    callbacks = cfg.get("callbacks") or {}
    n = len(callbacks)
    clock = found.clock
    length = f"max_duration={cfg.get('max_duration')}"
    try:
        # a ramp's batches are its stages' (printed with them), not those of a fixed global_train_batch_size
        fixed = clock and clock.max_duration.unit != "ba" and not _has_ramp(cfg)
        length += f" = {clock.total_batches} batches" if fixed else ""
    except Exception:  # batches unknown (epochs without a dataset size): the note says so
        pass
    return f"{name} ({params}), {length}, {n} callback{'s' if n != 1 else ''}"
