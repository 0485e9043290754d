"""``foundry-ext plot CONFIG.yaml [key=value ...]``: the LR of every batch of a train YAML, as a PNG and a text chart.

The row for 0-indexed batch ``b`` is the LR batch ``b`` trains with, in Composer's order (:mod:`foundry_ext.preview`:
the multiplier at timestamp ``b - 1``), for batches ``0`` to ``N - 1`` of an ``N``-batch run;
``tests/preview/test_preview.py`` checks it against a real ``Trainer.fit()`` for every scheduler family. The schedule is
evaluated at about ``--points`` evenly spaced batches plus every named mark (warmup end, milestones, restarts, cuts) and
its neighbours; each value is the scheduler's own, not an interpolation.

For ``reduce_lr_on_plateau`` the plot shows the time part (``base x warmup``); with ``--metrics FILE.csv`` (rows
``batch,value``: the monitored metric of a past run, as Composer logged it) it replays the adapter's decisions with
the very :class:`~foundry_ext.schedules.plateau_rule.PlateauRule` the callback uses and draws the cuts where a real
run applies them.
"""

from __future__ import annotations

import argparse
import csv
import time

from foundry_ext.cli import UsageError, add_config_arguments, check_output_paths, read_metrics

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the config, its overrides and the plot options."""
    add_config_arguments(parser, "max_duration=2000ba scheduler.t_warmup=100ba")
    parser.add_argument("--out", default="lr.png", metavar="FILE.png", help="PNG to write (default: lr.png)")
    parser.add_argument(
        "--metrics",
        metavar="FILE.csv|RUN",
        help="reduce_lr_on_plateau only: the monitored metric of a past run, a CSV of rows 'batch,value' (header "
        "optional), an MLflow run folder (mlruns/<experiment>/<run>) or runs:/RUN_ID of MLFLOW_TRACKING_URI; the "
        "cuts the adapter would make are simulated and drawn",
    )
    parser.add_argument(
        "--batches-per-epoch",
        type=_positive_int,
        metavar="N",
        help="batches in one epoch; needed when max_duration or a duration is in 'ep' (the YAML cannot say: it "
        "depends on the dataset size)",
    )
    parser.add_argument(
        "--tokens-per-batch",
        type=_positive_int,
        metavar="N",
        help="tokens per batch (default: global_train_batch_size x max_seq_len, i.e. full-length sequences)",
    )
    parser.add_argument(
        "--samples-per-batch",
        type=_positive_int,
        metavar="N",
        help="samples per batch (default: global_train_batch_size)",
    )
    parser.add_argument(
        "--points",
        type=_positive_int,
        default=3000,
        metavar="N",
        help="evenly spaced batches to evaluate (default: 3000)",
    )
    parser.add_argument(
        "--at",
        type=_non_negative_int,
        action="append",
        default=[],
        metavar="BATCH",
        help="also print the exact LR at this batch (repeatable)",
    )
    parser.add_argument("--csv", metavar="FILE.csv", help="also write the evaluated points: batch,multiplier,lr")
    parser.add_argument(
        "--law",
        metavar="LAW.json",
        help="also draw the loss a fitted law predicts (`foundry-ext law fit`; docs/law.md)",
    )


def _ramp_config(args: argparse.Namespace) -> dict | None:
    """The loaded config when it has a ``batch_size_schedule`` (its steps are drawn, not a fixed-batch clock's)."""
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.config.train_yaml import load_train_config

    try:
        cfg = load_train_config(args.config, args.overrides)
    except ConfigError:
        return None  # the pipeline reports it
    callbacks = cfg.get("callbacks")
    ramp = cfg.get("batch_size_schedule") is not None or (
        isinstance(callbacks, dict) and callbacks.get("batch_size_schedule") is not None
    )
    return cfg if ramp else None


def _plot_ramp(args: argparse.Namespace, cfg: dict, start: float) -> int:
    """A run whose batch grows: the LR of every step as the Trainer applies it (:mod:`..preview.batch_size`)."""
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.config.train_yaml import error_message
    from foundry_ext.preview.batch_size import is_plateau, ramp_steps, replay_plateau, stage_lines
    from foundry_ext.preview.chart import plateau_lines, text_chart
    from foundry_ext.preview.figure import render_png

    if args.law or args.at:
        raise UsageError("--law and --at are not available for a config with a batch_size_schedule")
    name = cfg["scheduler"].get("name") if isinstance(cfg.get("scheduler"), dict) else None
    plateau = is_plateau(cfg)
    if args.metrics and not plateau:
        raise UsageError(f"--metrics: only for scheduler.name: reduce_lr_on_plateau, not {name!r}")
    try:
        plan, time_steps = ramp_steps(cfg)
        steps, replay = time_steps, None
        if plateau:  # the time part; with --metrics, the cuts a past run's evaluations make
            rows = read_metrics(args.metrics, cfg["scheduler"].get("monitor")) if args.metrics else None
            steps, replay = replay_plateau(cfg, time_steps, rows)
    except ConfigError as e:
        raise UsageError.of_config(e) from None
    xs, lrs = [s.batch for s in steps], [s.lr for s in steps]
    for line in stage_lines(plan, steps, cfg):
        print(f"ramp: {line}")
    print(*text_chart(xs, lrs, len(steps), []), sep="\n")
    top, low = max(range(len(lrs)), key=lrs.__getitem__), min(range(len(lrs)), key=lrs.__getitem__)
    print(f"LR max {lrs[top]:.4g} at batch {top}, min {lrs[low]:.4g} at batch {low} (the LR each step trains with, "
          f"its stage's factor included, every one of the {len(steps)} steps)")  # fmt: skip
    if args.csv:
        try:
            with open(args.csv, "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["batch", "token", "sample", "global_batch", "stage", "lr_factor", "lr"])
                writer.writerows(
                    (s.batch, s.token, s.sample, s.size, s.stage, repr(s.factor), repr(s.lr)) for s in steps
                )
        except OSError as e:
            raise UsageError(f"--csv {args.csv}: cannot write: {error_message(e)}") from None
        print(f"wrote {args.csv} ({len(steps)} rows)")
    if replay is not None:
        print(*plateau_lines(replay.monitor, replay.rule, replay.metrics, replay.cuts, replay.base_lr, replay.skipped,
                             replay.ignored, lambda batch: steps[batch].factor), sep="\n")  # fmt: skip
    sizes = " -> ".join(map(str, plan.sizes))
    cuts = replay.cuts if replay is not None else []
    try:
        size = render_png(
            args.out, xs, lrs, [s.lr for s in time_steps] if cuts else None, [], cuts,
            replay.metrics if replay is not None else None, replay.monitor if replay is not None else "metric",
            f"{name} with batch-size warmup",
            f"global batch {sizes} samples, lr_scaling {plan.lr_scaling}, max_duration={cfg.get('max_duration')}",
            None, "learning rate (per optimizer step)", time_label="time part (base x warmup) x stage factor",
        )  # fmt: skip
    except (OSError, ValueError) as e:
        raise UsageError(f"--out {args.out}: cannot write: {' '.join(str(e).split())}") from None
    print(
        f"wrote {args.out} ({size[0]}x{size[1]} px); {time.perf_counter() - start:.2f}s in all (not counting imports)"
    )
    return 0


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be > 0")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be >= 0")
    return value


def run(args: argparse.Namespace) -> int:
    """Build the pipeline, evaluate it at the sampled batches, print the report and draw the PNG."""
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.config.train_yaml import error_message
    from foundry_ext.law.lawfile import LawFileError, law_curve
    from foundry_ext.preview.chart import report, sample_batches
    from foundry_ext.preview.figure import draw
    from foundry_ext.preview.pipeline import BatchesPerEpochNeeded, LRPipeline, ScheduleError

    check_output_paths(("--out", args.out), ("--csv", args.csv))  # before any work, not after drawing the chart
    start = time.perf_counter()
    if _ramp_config(args) is not None:
        return _plot_ramp(args, _ramp_config(args), start)
    try:
        p = LRPipeline.from_yaml(
            args.config,
            args.overrides,
            batches_per_epoch=args.batches_per_epoch,
            samples_per_batch=args.samples_per_batch,
            tokens_per_batch=args.tokens_per_batch,
        )
        if args.metrics:
            rows = read_metrics(args.metrics, p.block.get("monitor"))
            if not p.plateau:
                raise UsageError(f"--metrics: only for scheduler.name: reduce_lr_on_plateau, not {p.name!r}")
            p = p.with_metrics(rows)
        eval_start = time.perf_counter()
        marks = p.marks()
        for batch in args.at:
            if batch >= p.total:
                raise UsageError(f"--at {batch}: the run trains batches 0 to {p.total - 1}")
        xs = sample_batches(p.total, args.points, [m.batch for m in marks] + list(args.at))
        lrs = p.lrs_at(xs)
        time_lrs = p.lrs_at(xs, cuts=False) if p.cuts else None
        at = {batch: p.multiplier(batch) for batch in args.at}
        eval_seconds = time.perf_counter() - eval_start
        loss_curve = law_curve(args.law, p.lrs(), xs) if args.law else None
    except BatchesPerEpochNeeded:
        raise UsageError(
            "--batches-per-epoch N is needed: max_duration or a scheduler duration is in 'ep', and the YAML does not "
            "say how many batches an epoch has (no local MDS index for train_loader.dataset)"
        ) from None
    except ConfigError as e:
        raise UsageError.of_config(e) from None
    except ScheduleError as e:
        raise UsageError(str(e)) from None
    except LawFileError as e:
        raise UsageError(f"--law {e}") from None
    for line in report(p, xs, lrs, marks):
        print(line)
    for batch, m in at.items():
        print(f"batch {batch}: lr {p.base_lr * m!r} (multiplier {m!r})")
    if args.csv:
        try:
            with open(args.csv, "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["batch", "multiplier", "lr"])
                writer.writerows((b, repr(v / p.base_lr), repr(v)) for b, v in zip(xs, lrs.tolist(), strict=True))
        except OSError as e:
            raise UsageError(f"--csv {args.csv}: cannot write: {error_message(e)}") from None
        print(f"wrote {args.csv} ({len(xs)} rows)")
    if loss_curve is not None:
        print(f"--law {args.law}: predicted {loss_curve[2]} loss after the last batch {loss_curve[1][-1]:.4f}")
    try:
        size = draw(args.out, p, xs, lrs, time_lrs, marks, loss_curve[:2] if loss_curve else None)
    except (OSError, ValueError) as e:  # a missing folder, or an extension matplotlib cannot write
        raise UsageError(f"--out {args.out}: cannot write: {' '.join(str(e).split())}") from None
    print(
        f"wrote {args.out} ({size[0]}x{size[1]} px); {len(xs)} batches evaluated in {eval_seconds:.2f}s, "
        f"{time.perf_counter() - start:.2f}s in all (not counting imports)"
    )
    return 0
