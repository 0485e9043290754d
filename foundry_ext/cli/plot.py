"""``foundry-ext plot CONFIG.yaml [key=value ...]``: the LR schedule of a train YAML, as a PNG and a text chart.

The scheduler is built through llm-foundry's registry exactly as ``train.py`` builds it, then evaluated on one
minimal Composer ``State`` (:mod:`foundry_ext._schedule_eval`) at about ``--points`` evenly spaced batches plus every
phase boundary and its neighbours. Each plotted value is the scheduler's own, not an interpolation; a 1,000,000-batch
schedule takes well under a second to evaluate.

For ``reduce_lr_on_plateau`` the plot shows the time part (``base x warmup``); with ``--metrics FILE.csv`` (rows
``batch,value``: the monitored metric of a past run) it replays the adapter's decisions with the very
:class:`~foundry_ext.plateau.PlateauRule` the callback uses and draws the cuts.
"""

from __future__ import annotations

import argparse
import bisect
import csv
import os
import textwrap
import time
from collections.abc import Sequence
from typing import Any

from foundry_ext._time import format_time
from foundry_ext.cli import UsageError

__all__ = ["add_arguments", "read_metrics", "run", "text_chart"]

CHART_WIDTH = 60
CHART_HEIGHT = 12


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the config, its overrides and the plot options."""
    parser.add_argument("config", metavar="CONFIG.yaml", help="an llm-foundry train YAML")
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="overrides, as for train.py (e.g. max_duration=2000ba scheduler.t_warmup=100ba); put them right "
        "after CONFIG.yaml",
    )
    parser.add_argument("--out", default="lr.png", metavar="FILE.png", help="PNG to write (default: lr.png)")
    parser.add_argument(
        "--metrics",
        metavar="FILE.csv",
        help="reduce_lr_on_plateau only: the monitored metric of a past run, rows 'batch,value' (header optional); "
        "the cuts the adapter would make are simulated and drawn",
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


def read_metrics(path: str) -> list[tuple[int, float]]:
    """Rows ``batch,value`` of ``path``, in order; a first row that is not numeric is taken as a header."""
    if not os.path.isfile(path):
        raise UsageError(f"--metrics {path}: no such file")
    rows: list[tuple[int, float]] = []
    with open(path, newline="") as f:
        for lineno, row in enumerate(csv.reader(f), start=1):
            cells = [c.strip() for c in row]
            if not any(cells) or cells[0].startswith("#"):
                continue
            if len(cells) < 2:
                raise UsageError(f"--metrics {path}:{lineno}: expected 'batch,value', got {','.join(row)!r}")
            try:
                batch = int(float(cells[0].removesuffix("ba")))
                value = float(cells[1])
            except ValueError:
                if not rows and lineno == 1:
                    continue  # header
                raise UsageError(
                    f"--metrics {path}:{lineno}: expected 'batch,value' numbers, got {','.join(row)!r}"
                ) from None
            if rows and batch < rows[-1][0]:
                raise UsageError(f"--metrics {path}:{lineno}: batch {batch} comes after batch {rows[-1][0]}; sort rows")
            rows.append((batch, value))
    if not rows:
        raise UsageError(f"--metrics {path}: no 'batch,value' rows")
    return rows


def run(args: argparse.Namespace) -> int:
    """Build, evaluate, print and draw the schedule."""
    from llmfoundry import registry  # noqa: F401 - the slow import (seconds), kept out of the timings below

    from foundry_ext._config import ConfigError
    from foundry_ext._schedule_eval import ScheduleEvaluator, boundaries, sample_batches, simulate_plateau
    from foundry_ext.cli import _config_loading as loading

    start = time.perf_counter()

    cfg = loading.load_train_config(args.config, args.overrides)
    max_duration = loading.max_duration(cfg)
    name, kwargs = loading.scheduler_spec(cfg)
    clock, clock_note = _clock(cfg, kwargs, max_duration, args)
    lr = loading.optimizer_lr(cfg)
    base_lr = 1.0 if lr is None else lr
    metrics = read_metrics(args.metrics) if args.metrics else None
    scheduler = loading.build_scheduler(name, kwargs)
    plateau = hasattr(scheduler, "time_multiplier") and hasattr(scheduler, "rule")
    if metrics is not None and not plateau:
        raise UsageError(f"--metrics: only for scheduler.name: reduce_lr_on_plateau, not {name!r}")

    eval_start = time.perf_counter()
    evaluator = ScheduleEvaluator(scheduler, max_duration, clock, base_lr=base_lr)
    total = evaluator.total_batches
    time_part = scheduler.time_multiplier if plateau else scheduler

    def multiplier(batch: int) -> float:
        try:
            return float(time_part(evaluator.set_batch(batch), evaluator.ssr))
        except ConfigError as e:
            raise UsageError(loading.one_line(e)) from None
        except Exception as e:
            raise UsageError(
                f"scheduler ({name}) failed at batch {batch}: {type(e).__name__}: {loading.one_line(e)}"
            ) from None

    multiplier(0)  # the Trainer's first call: runs the checks that need max_duration (e.g. WSD overlap)
    bounds = boundaries(scheduler, evaluator)
    cuts: list[Any] = []
    skipped = ignored = 0
    if metrics is not None:
        ignored = sum(1 for b, _ in metrics if b > total)
        metrics = [(b, v) for b, v in metrics if b <= total]
        cuts, skipped = simulate_plateau(scheduler, evaluator, metrics, [base_lr])
    cut_batches = [c.batch for c in cuts]
    scales = [1.0] + [c.cut.new_scale for c in cuts]

    def scale_at(batch: int) -> float:
        return scales[bisect.bisect_right(cut_batches, batch)]  # a cut at batch b applies from batch b on

    xs = sample_batches(total, args.points, [b for _, b in bounds] + cut_batches + list(args.at))
    time_values = [multiplier(b) for b in xs]
    values = [m * scale_at(b) for b, m in zip(xs, time_values, strict=True)]
    lrs = [base_lr * v for v in values]
    eval_seconds = time.perf_counter() - eval_start

    params = loading.summarize(kwargs)
    lr_text = "the multiplier (optimizer.lr is not set)" if lr is None else f"lr={lr:g}"
    print(f"{name} ({params or 'defaults'}); {lr_text}, max_duration={format_time(max_duration)} = {total} batches")
    for line in text_chart(xs, lrs, total, bounds):
        print(line)
    i_max = max(range(len(lrs)), key=lrs.__getitem__)
    i_min = min(range(len(lrs)), key=lrs.__getitem__)
    print(
        f"LR max {lrs[i_max]:.4g} at batch {xs[i_max]}, min {lrs[i_min]:.4g} at batch {xs[i_min]} "
        f"(exact values at {len(xs)} batches: evenly spaced, plus every boundary and cut and its neighbours)"
    )
    if bounds:
        print("boundaries: " + ", ".join(f"{label} at batch {b}" for label, b in bounds))
    if clock_note:
        print(clock_note)
    if plateau:
        _print_plateau(scheduler, metrics, cuts, skipped, ignored, base_lr)
    for batch in args.at:
        if batch > total:
            raise UsageError(f"--at {batch}: after the end of the run (batch {total})")
        m = multiplier(batch) * scale_at(batch)
        print(f"batch {batch}: lr {base_lr * m!r} (multiplier {m!r})")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["batch", "multiplier", "lr"])
            writer.writerows((b, repr(m), repr(v)) for b, m, v in zip(xs, values, lrs, strict=True))
        print(f"wrote {args.csv} ({len(xs)} rows)")

    full = loading.summarize(kwargs, limit=280)
    title = f"{name}: {full}" if full else f"{name} (defaults)"
    subtitle = f"{lr_text}, max_duration={format_time(max_duration)}"
    size = _render_png(
        args.out,
        xs,
        lrs,
        [base_lr * v for v in time_values] if cuts else None,
        bounds,
        cuts,
        metrics,
        getattr(scheduler, "monitor", "metric"),
        title,
        subtitle,
        clock.tokens_per_batch if clock_note else None,
        "learning rate" if lr is not None else "LR multiplier",
    )
    print(
        f"wrote {args.out} ({size[0]}x{size[1]} px); {len(xs)} batches evaluated in {eval_seconds:.2f}s, "
        f"{time.perf_counter() - start:.2f}s in all (not counting imports)"
    )
    return 0


def _clock(cfg: dict, kwargs: dict, max_duration: Any, args: argparse.Namespace) -> tuple[Any, str]:
    """Samples/tokens per batch and batches per epoch; a UsageError when a duration needs one that is unknown."""
    from foundry_ext._schedule_eval import Clock, units_used
    from foundry_ext.cli import _config_loading as loading

    units = units_used(kwargs) | {max_duration.unit.value}
    spb = args.samples_per_batch or loading.samples_per_batch(cfg)
    tpb, source = loading.tokens_per_batch(cfg)
    if args.tokens_per_batch:
        tpb, source = args.tokens_per_batch, "--tokens-per-batch"
    if "ep" in units and not args.batches_per_epoch:
        raise UsageError(
            "--batches-per-epoch N is needed: max_duration or a scheduler duration is in 'ep', and how many batches "
            "an epoch has depends on the dataset size, which the YAML does not say"
        )
    if "tok" in units and not tpb:
        raise UsageError(
            "--tokens-per-batch N is needed: a duration is in 'tok' and the YAML lacks global_train_batch_size or "
            "max_seq_len (variables.max_seq_len / model.max_seq_len)"
        )
    if "sp" in units and not spb:
        raise UsageError(
            "--samples-per-batch N is needed: a duration is in 'sp' and the YAML lacks global_train_batch_size"
        )
    note = ""
    if tpb:
        assumed = "" if source == "--tokens-per-batch" else "; assumes every sequence is max_seq_len long"
        note = f"1 batch = {spb or '?'} samples = {tpb} tokens ({source}{assumed})"
    return Clock(spb, tpb, args.batches_per_epoch), note


def _print_plateau(
    scheduler: Any, metrics: list | None, cuts: list, skipped: int, ignored: int, base_lr: float
) -> None:
    rule = scheduler.rule
    print(
        f"plateau: monitor {scheduler.monitor} ({rule.mode}), factor {rule.factor:g}, patience {rule.patience}, "
        f"threshold {rule.threshold:g} ({rule.threshold_mode}), cooldown {rule.cooldown}"
    )
    if metrics is None:
        print("plateau: drawn without cuts (the time part base x warmup); pass --metrics FILE.csv to simulate cuts")
        return
    extra = f", {skipped} in warmup (not counted, as in training)" if skipped else ""
    extra += f", {ignored} after max_duration ignored" if ignored else ""
    print(f"plateau: simulated {len(metrics)} evaluations{extra}: {len(cuts)} cut{'s' if len(cuts) != 1 else ''}")
    for c in cuts:
        cut = c.cut
        print(
            f"  cut at batch {c.batch}: scale {cut.old_scale:g} -> {cut.new_scale:g} (lr {base_lr * cut.old_scale:.4g} "
            f"-> {base_lr * cut.new_scale:.4g}); value {cut.value:.6g} vs best {cut.best:.6g}, "
            f"{cut.evals_waited} evaluations without improvement"
        )


def text_chart(
    xs: Sequence[int],
    ys: Sequence[float],
    total: int,
    bounds: Sequence[tuple[str, int]] = (),
    width: int = CHART_WIDTH,
    height: int = CHART_HEIGHT,
) -> list[str]:
    """A ``width x height`` character chart of ``ys`` against batches ``xs``; boundaries marked ``|`` on the axis.

    Each column covers ``total / width`` batches and marks every row between the lowest and the highest value
    evaluated in it, so a cliff shows as a vertical stroke rather than a gap.
    """
    lo, hi = min(ys), max(ys)
    span = hi - lo

    def row(v: float) -> int:
        return 0 if span <= 0 else round((v - lo) / span * (height - 1))

    def column(batch: int) -> int:
        return min(width - 1, batch * width // (total + 1))

    cols: list[tuple[int, int] | None] = [None] * width
    for x, y in zip(xs, ys, strict=True):
        c, r = column(x), row(y)
        cur = cols[c]
        cols[c] = (r, r) if cur is None else (min(cur[0], r), max(cur[1], r))
    grid = [[" "] * width for _ in range(height)]
    for c, rows in enumerate(cols):
        if rows is not None:
            for r in range(rows[0], rows[1] + 1):
                grid[height - 1 - r][c] = "*"
    top, bottom = f"{hi:.3g}", f"{lo:.3g}"
    pad = max(len(top), len(bottom))
    lines = []
    for i, cells in enumerate(grid):
        label = top if i == 0 else bottom if i == height - 1 else ""
        lines.append(f"{label:>{pad}} |{''.join(cells)}")
    axis = ["-"] * width
    for _, b in bounds:
        axis[column(b)] = "|"
    lines.append(f"{'':>{pad}} +{''.join(axis)}")
    end = f"{total} batches"
    lines.append(f"{'':>{pad}}  0{end:>{width - 1}}")
    return lines


def _human(tokens: float) -> str:
    """``2.5B``, ``300M``, ``12k``: token counts short enough for axis ticks."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(tokens) >= scale:
            return f"{tokens / scale:g}{suffix}"
    return f"{tokens:g}"


def _render_png(
    path: str,
    xs: Sequence[int],
    lrs: Sequence[float],
    time_lrs: Sequence[float] | None,
    bounds: Sequence[tuple[str, int]],
    cuts: Sequence[Any],
    metrics: Sequence[tuple[int, float]] | None,
    monitor: str,
    title: str,
    subtitle: str,
    tokens_per_batch: int | None,
    ylabel: str,
) -> tuple[int, int]:
    """Draw the schedule to ``path``; return the image size in pixels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(10, 5.2), dpi=100)
    try:
        if time_lrs is not None:
            ax.plot(xs, time_lrs, color="tab:gray", linestyle="--", linewidth=1.2, label="time part (base x warmup)")
            ax.plot(xs, lrs, color="tab:blue", linewidth=1.8, label="with simulated plateau cuts")
        else:
            ax.plot(xs, lrs, color="tab:blue", linewidth=1.8, label="learning rate")
        colors = ["tab:green", "tab:orange", "tab:purple", "tab:brown", "tab:olive", "tab:cyan"]
        for i, (label, batch) in enumerate(bounds):
            ax.axvline(batch, color=colors[i % len(colors)], linestyle=":", linewidth=1.3, label=f"{label} ({batch})")
        if cuts:
            index = {b: i for i, b in enumerate(xs)}
            cx = [c.batch for c in cuts]
            cy = [lrs[index[b]] for b in cx]
            ax.scatter(cx, cy, color="tab:red", marker="v", s=60, zorder=5, label="simulated cut")
        if metrics:
            twin = ax.twinx()
            twin.plot([b for b, _ in metrics], [v for _, v in metrics], "o", color="tab:red", alpha=0.35, markersize=4)
            twin.set_ylabel(f"{monitor} (dots)", color="tab:red")
            twin.tick_params(axis="y", colors="tab:red")
        ax.set_xlabel("batch")
        ax.set_ylabel(ylabel)
        ax.set_xlim(0, xs[-1])
        ax.set_ylim(bottom=0)
        # plain numbers (0.0006) rather than an offset label ("1e-3") that collides with the top axis
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
        ax.grid(True, alpha=0.3)
        if tokens_per_batch:
            top = ax.secondary_xaxis("top", functions=(lambda b: b * tokens_per_batch, lambda t: t / tokens_per_batch))
            top.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _human(v)))
            top.set_xlabel("tokens (full-length sequences assumed)")
        wrapped = "\n".join(textwrap.wrap(title, 100)[:3])
        ax.set_title(f"{wrapped}\n{subtitle}", fontsize=10)
        ax.legend(loc="best", fontsize=8, framealpha=0.85)
        fig.tight_layout()
        try:
            fig.savefig(path)
        except (OSError, ValueError) as e:  # a missing folder, or an extension matplotlib cannot write
            raise UsageError(f"--out {path}: cannot write: {' '.join(str(e).split())}") from None
        width, height = fig.canvas.get_width_height()
    finally:
        plt.close(fig)
    return width, height
