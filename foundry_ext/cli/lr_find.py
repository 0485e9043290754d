"""``foundry-ext lr-find CONFIG.yaml [key=value ...]``: an LR range test on the real model and data of a train YAML.

The model, tokenizer, train dataloader and optimizer are built by llm-foundry's own ``train()`` from the YAML, and
trained by a real Composer ``Trainer`` for ``--batches`` batches while the LR rises exponentially from ``--min`` to
``--max`` (:mod:`foundry_ext.lr_find`). Rank 0 writes a PNG, and optionally a CSV and a JSON; the last console line
is the override to paste. Works in one process and under ``composer -n N $(which foundry-ext) lr-find ...``.
"""

from __future__ import annotations

import argparse
import math
import os

from foundry_ext.cli import UsageError, add_config_arguments, check_output_paths

__all__ = ["add_arguments", "run"]

MIN_BATCHES = 10


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the config, its overrides and the range-test options (no heavy import here: ``--help`` stays fast)."""
    add_config_arguments(parser, "global_train_batch_size=32")
    # Numbers are parsed in run() so that a bad one gets the one-line error of every other bad input.
    parser.add_argument("--min", default=None, metavar="LR", help="LR of the first batch (default: 1e-07)")
    parser.add_argument(
        "--max",
        default=None,
        metavar="LR",
        help="LR of the last batch (default: 1); the run stops earlier once the loss diverges",
    )
    parser.add_argument(
        "--batches",
        default="100",
        metavar="N",
        help=f"batches of the ramp, >= {MIN_BATCHES}; the run stops earlier once the loss diverges (default: 100)",
    )
    parser.add_argument("--out", default="lr-find.png", metavar="FILE.png", help="PNG to write (default: lr-find.png)")
    parser.add_argument("--csv", metavar="FILE.csv", help="also write every point: batch,lr,loss,smoothed,read_lr")
    parser.add_argument(
        "--json", metavar="FILE.json", help="also write the summary (suggested_lr, rule, every rule's...)"
    )
    parser.add_argument(
        "--beta", default=None, metavar="B", help="smoothing of the loss (EMA factor in [0, 1); default: 0.9)"
    )
    parser.add_argument(
        "--reading",
        default=None,
        metavar="READING",
        help="lag-matched (default: each smoothed loss read at the LRs averaged the same way) or batch-lr (at its "
        "batch's LR, as fastai and Lightning do); see docs/cli.md",
    )
    parser.add_argument(
        "--rule",
        default=None,
        metavar="RULE",
        help="the rule to suggest with: minimum (default, see docs/cli.md), valley, steepest, steepest_linear",
    )


def _number(option: str, text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{option} {text}: not a number; expected a finite LR > 0, e.g. 1e-7") from None
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{option} {text}: must be a finite LR > 0, e.g. 1e-7")
    return value


def _options(args: argparse.Namespace) -> tuple[float, float, int, float, str, str]:
    from foundry_ext.lr_find.rules import DEFAULT_BETA, DEFAULT_LR_MAX, DEFAULT_LR_MIN, DEFAULT_RULE, RULES
    from foundry_ext.lr_find.runner import READINGS

    args.min = args.min or repr(DEFAULT_LR_MIN)
    args.max = args.max or repr(DEFAULT_LR_MAX)
    lr_min, lr_max = _number("--min", args.min), _number("--max", args.max)
    if lr_min >= lr_max:
        raise UsageError(f"--min {args.min} --max {args.max}: --min must be below --max")
    try:
        batches = int(args.batches.replace("_", ""))
    except ValueError:
        raise UsageError(f"--batches {args.batches}: not an integer; expected >= {MIN_BATCHES}") from None
    if batches < MIN_BATCHES:
        raise UsageError(f"--batches {batches}: too few for a range test; at least {MIN_BATCHES}")
    try:
        beta = DEFAULT_BETA if args.beta is None else float(args.beta)
    except ValueError:
        beta = math.nan
    if not 0.0 <= beta < 1.0:
        raise UsageError(f"--beta {args.beta}: must be a number in [0, 1), e.g. {DEFAULT_BETA}")
    rule = args.rule or DEFAULT_RULE
    if rule not in RULES:
        raise UsageError(f"--rule {rule}: unknown; one of {', '.join(RULES)}")
    reading = args.reading or READINGS[0]
    if reading not in READINGS:
        raise UsageError(f"--reading {reading}: unknown; one of {', '.join(READINGS)}")
    check_output_paths(("--out", args.out), ("--csv", args.csv), ("--json", args.json))
    return lr_min, lr_max, batches, beta, rule, reading


def run(args: argparse.Namespace) -> int:
    """Check the options, load the YAML, run the range test, print and write what it found."""
    options = _options(args)  # before the slow imports: bad options and a bad YAML fail fast
    cfg, yaml_lr = _config(args)

    import torch

    threads = torch.get_num_threads()
    if "OMP_NUM_THREADS" not in os.environ:
        # One CPU thread per process unless told otherwise, as this repository's train.py (and torchrun) do: on a
        # busy CPU, OpenMP threads that spin-wait for each other made 100 demo batches take 104 s instead of 8 s.
        # torch may be imported already (by the package, or in tests): set the count, not the variable. GPU runs
        # are unaffected.
        torch.set_num_threads(1)
    try:
        return _run(args, cfg, yaml_lr, *options)
    finally:
        torch.set_num_threads(threads)  # main() may be called in a process that goes on (tests)


def _config(args: argparse.Namespace) -> tuple[dict, float | None]:
    """The train config with its overrides, and its ``optimizer.lr``; a usage error for what cannot be trained.

    Needs neither torch nor Composer: a bad YAML is refused in a fraction of a second, not after ~7 s of imports.
    """
    from foundry_ext.config import train_yaml as loading
    from foundry_ext.config.errors import ConfigError

    try:
        cfg = loading.load_train_config(args.config, args.overrides)
        yaml_lr = loading.optimizer_lr(cfg)
    except ConfigError as e:
        raise UsageError.of_config(e) from None
    if not isinstance(cfg.get("optimizer"), dict) or not cfg["optimizer"].get("name"):
        raise UsageError("optimizer: missing; the range test trains the YAML's optimizer, e.g. {name: decoupled_adamw}")
    return cfg, yaml_lr


def _run(
    args: argparse.Namespace,
    cfg: dict,
    yaml_lr: float | None,
    lr_min: float,
    lr_max: float,
    batches: int,
    beta: float,
    rule: str,
    reading: str,
) -> int:
    from composer.utils import dist

    from foundry_ext.lr_find import TrainLoaderTooShortError, lr_find
    from foundry_ext.lr_find.report import render_png, write_csv, write_json
    from foundry_ext.lr_find.rules import paste_value
    from foundry_ext.lr_find.runner import FSDP_ONE_PROCESS, fsdp_unused, ignored_keys

    rank0 = dist.get_global_rank() == 0
    if rank0:
        print(
            f"lr-find: {args.config}: {batches} batches, lr {lr_min:g} -> {lr_max:g} (exponential), smoothing beta "
            f"{beta:g} ({reading} reading), through llm-foundry's train() with the YAML's model, data and optimizer",
            flush=True,
        )
        ignored = ignored_keys(cfg)
        if ignored:
            print(
                f"lr-find: ignored from the YAML (no checkpoint read or written, no logger, no evaluation): "
                f"{', '.join(ignored)}",
                flush=True,
            )
        if fsdp_unused(cfg, dist.get_world_size()):
            print(FSDP_ONE_PROCESS, flush=True)
    try:
        result = lr_find(cfg, lr_min, lr_max, batches, beta=beta, rule=rule, reading=reading)
    except TrainLoaderTooShortError as e:
        raise UsageError(str(e)) from None

    if rank0:
        if result.stopped_early:
            print(f"stopped early after {result.batches_run}/{batches} batches: {result.stop_reason}")
        else:
            print(f"ran {result.batches_run}/{batches} batches without divergence (stopped_early: false)")
        i = result.min_loss_batch
        if i is not None:
            print(
                f"minimum of the smoothed loss: {result.smoothed[i]:.4f} at lr {result.read_lrs[i]:.3e} (batch {i}, "
                f"{reading} reading)"
            )
        print(
            f"suggestions ({reading} reading): "
            + ", ".join(
                f"{name} {'-' if r.lr is None else f'{r.lr:.3e}'}{' (used)' if name == result.rule else ''}"
                for name, r in result.suggestions.items()
            )
        )
        size = render_png(args.out, result, f"{args.config} {' '.join(args.overrides)}".strip(), yaml_lr)
        written = [f"{args.out} ({size[0]}x{size[1]} px)"]
        if args.csv:
            write_csv(args.csv, result)
            written.append(f"{args.csv} ({result.batches_run} rows)")
        if args.json:
            write_json(args.json, result, yaml_lr)
            written.append(args.json)
        print(f"wrote {', '.join(written)}; {result.seconds:.1f}s for build and range test")
        used = result.suggestions[result.rule]
        if used.at_window_end and used.batch is not None:
            # what the rule looks for lies at or beyond the last point it reads: the ramp's end set the suggestion
            print(
                f"note: the {result.rule} rule's point is the last of its window (batch {used.batch}, lr "
                f"{result.read_lrs[used.batch]:.3e}): the loss had not turned up yet, so --max {lr_max:g} set this "
                f"suggestion (docs/cli.md: 'When the ramp ends first')"
            )
    yaml_text = f"the YAML has optimizer.lr={yaml_lr:g}" if yaml_lr is not None else "the YAML sets no optimizer.lr"
    if result.suggested_lr is None:
        print(
            f"no suggestion: the {result.rule} rule had too few points ({result.batches_run} batches run); "
            f"raise --batches or lower --min; {yaml_text}"
        )
        return 1
    # every rank prints the answer (the launcher keeps rank 0's console; `--stdout` keeps the others')
    low, high = result.suggested_range  # type: ignore[misc]
    print(
        f"optimizer.lr={paste_value(result.suggested_lr)}  # {result.rule} rule, range {low:.3g} to {high:.3g}; "
        f"{yaml_text}",
        flush=True,
    )
    return 0
