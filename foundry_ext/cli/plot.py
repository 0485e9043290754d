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
import textwrap
import time
from collections.abc import Iterable, Sequence
from typing import Any

from foundry_ext.cli import UsageError, add_config_arguments, check_output_paths

__all__ = ["add_arguments", "read_metrics", "run", "text_chart"]

CHART_WIDTH = 60
CHART_HEIGHT = 12


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


def read_metrics(path: str, monitor: str | None = None) -> list[tuple[int, float]]:
    """Rows ``batch,value`` of a CSV, or the ``monitor`` metric of an MLflow run (:mod:`foundry_ext.runlog`)."""
    from foundry_ext.runlog import RunLogError, read_series

    try:
        return read_series(path, monitor)
    except RunLogError as e:
        raise UsageError(f"--metrics {e}") from None


def run(args: argparse.Namespace) -> int:
    """Build, evaluate, print and draw the schedule."""
    from foundry_ext.config.durations import UnknownBatchesPerEpoch, timestamp_of_batch
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.config.train_yaml import load_train_config, one_line, optimizer_lr, run_clock, summarize
    from foundry_ext.preview import PlateauPreview, Preview, build_schedule, simulate_plateau

    check_output_paths(("--out", args.out), ("--csv", args.csv))  # before any work, not after drawing the chart
    start = time.perf_counter()
    try:
        cfg = load_train_config(args.config, args.overrides)
        clock = run_clock(
            cfg,
            batches_per_epoch=args.batches_per_epoch,
            samples_per_batch=args.samples_per_batch,
            tokens_per_batch=args.tokens_per_batch,
        )
        block = cfg.get("scheduler")
        if not isinstance(block, dict) or not block.get("name"):
            raise ConfigError(
                "scheduler.name", "missing; expected a block with a name, e.g. {name: cosine_with_warmup}"
            )
        _check_name(block["name"])
        lr = optimizer_lr(cfg)
        metrics = read_metrics(args.metrics, block.get("monitor")) if args.metrics else None
        total = clock.total_batches
        schedule = build_schedule(block, clock)
    except UnknownBatchesPerEpoch:
        raise UsageError(
            "--batches-per-epoch N is needed: max_duration or a scheduler duration is in 'ep', and the YAML does not "
            "say how many batches an epoch has (no local MDS index for train_loader.dataset)"
        ) from None
    except ConfigError as e:
        raise UsageError(e.problems[0].__str__() if len(e.problems) == 1 else "; ".join(map(str, e.problems))) from None
    except UsageError:
        raise
    except Exception as e:  # a scheduler of another package failing to build
        raise UsageError(f"scheduler ({block.get('name')}): {type(e).__name__}: {one_line(e)}") from None
    name = block["name"]
    plateau = isinstance(schedule, PlateauPreview)
    if metrics is not None and not plateau:
        raise UsageError(f"--metrics: only for scheduler.name: reduce_lr_on_plateau, not {name!r}")
    base_lr = 1.0 if lr is None else lr

    eval_start = time.perf_counter()
    cuts: list[Any] = []
    skipped = ignored = 0
    if metrics is not None:
        ignored = sum(1 for b, _ in metrics if b >= total)
        metrics = [(b, v) for b, v in metrics if b < total]
        cuts, skipped = simulate_plateau(schedule, metrics, [base_lr])  # type: ignore[arg-type]
    preview = Preview(schedule, clock, base_lr, cuts)
    marks = preview.marks()
    for batch in args.at:
        if batch >= total:
            raise UsageError(f"--at {batch}: the run trains batches 0 to {total - 1}")

    def lr_of(batch: int) -> float:
        try:
            return preview.lr(batch)
        except ConfigError as e:
            raise UsageError(str(e.problems[0])) from None
        except Exception as e:
            raise UsageError(f"scheduler ({name}) failed at batch {batch}: {type(e).__name__}: {one_line(e)}") from None

    xs = sample_batches(total, args.points, [m.batch for m in marks] + list(args.at))
    lrs = [lr_of(b) for b in xs]
    time_lrs = [base_lr * schedule.multiplier(timestamp_of_batch(b)) for b in xs] if cuts else None
    eval_seconds = time.perf_counter() - eval_start

    params = summarize({k: v for k, v in block.items() if k != "name"})
    lr_text = "the multiplier (optimizer.lr is not set)" if lr is None else f"lr={lr:g}"
    print(f"{name} ({params or 'defaults'}); {lr_text}, max_duration={clock.max_duration} = batches 0 to {total - 1}")
    for line in text_chart(xs, lrs, total, [(m.label, m.batch) for m in marks]):
        print(line)
    i_max = max(range(len(lrs)), key=lrs.__getitem__)
    i_min = min(range(len(lrs)), key=lrs.__getitem__)
    print(
        f"LR max {lrs[i_max]:.4g} at batch {xs[i_max]}, min {lrs[i_min]:.4g} at batch {xs[i_min]} (the LR each batch "
        f"trains with, exact at {len(xs)} batches: evenly spaced, plus every mark and its neighbours)"
    )
    if marks:
        print("marks: " + ", ".join(f"{m.label} at batch {m.batch}" for m in marks))
    for note in clock.notes:
        print(note)
    for warning in getattr(schedule, "warnings", []):
        print(f"warning: {warning}")
    if plateau:
        _print_plateau(schedule, metrics, cuts, skipped, ignored, base_lr)
    for batch in args.at:
        m = preview.multiplier(batch)
        print(f"batch {batch}: lr {base_lr * m!r} (multiplier {m!r})")
    if args.csv:
        try:
            with open(args.csv, "w", newline="") as f:
                writer = csv.writer(f)
                writer.writerow(["batch", "multiplier", "lr"])
                writer.writerows((b, repr(v / base_lr), repr(v)) for b, v in zip(xs, lrs, strict=True))
        except OSError as e:
            raise UsageError(f"--csv {args.csv}: cannot write: {one_line(e)}") from None
        print(f"wrote {args.csv} ({len(xs)} rows)")

    loss_curve = _law_curve(args.law, [lr_of(b) for b in range(total)], xs) if args.law else None

    full = summarize({k: v for k, v in block.items() if k != "name"}, limit=280)
    title = f"{name}: {full}" if full else f"{name} (defaults)"
    subtitle = f"{lr_text}, max_duration={clock.max_duration}"
    size = _render_png(
        args.out,
        xs,
        lrs,
        time_lrs,
        marks,
        cuts,
        metrics,
        getattr(getattr(schedule, "model", None), "monitor", "metric"),
        title,
        subtitle,
        clock.tokens_per_batch,
        "learning rate" if lr is not None else "LR multiplier",
        loss_curve,
    )
    print(
        f"wrote {args.out} ({size[0]}x{size[1]} px); {len(xs)} batches evaluated in {eval_seconds:.2f}s, "
        f"{time.perf_counter() - start:.2f}s in all (not counting imports)"
    )
    return 0


def _law_curve(path: str, every_lr: list[float], xs: Sequence[int]) -> tuple[list[int], list[float]]:
    """The loss a LAW.json predicts after each batch of ``xs`` (``x + 1`` batches trained), from every batch's LR."""
    import numpy as np

    from foundry_ext.law.lawfile import LawFileError, read_law
    from foundry_ext.law.predict import predict

    try:
        form, params = read_law(path)
    except LawFileError as e:
        raise UsageError(f"--law {e}") from None
    steps = np.asarray(xs, dtype=np.int64) + 1
    loss = predict(form, params, np.asarray(every_lr), steps).tolist()
    print(f"--law {path}: predicted {form} loss after the last batch {loss[-1]:.4f}")
    return [int(s) for s in steps], loss


def _check_name(name: str) -> None:
    from foundry_ext.catalog.preflight import known_scheduler_names
    from foundry_ext.config.errors import ConfigError, scheduler_did_you_mean

    names = known_scheduler_names()
    if name not in names:
        raise ConfigError(
            "scheduler.name",
            f"{name!r} is not a registered scheduler{scheduler_did_you_mean(str(name), names)}; "
            "`foundry-ext schedulers` lists all",
        )


def sample_batches(total: int, points: int, exact: Iterable[int] = ()) -> list[int]:
    """About ``points`` evenly spaced batches in ``[0, total - 1]``, plus each of ``exact`` and its neighbours."""
    last = total - 1
    step = max(1, last // max(1, points - 1))
    chosen = set(range(0, last + 1, step))
    chosen.add(last)
    for b in exact:
        chosen.update(x for x in (b - 1, b, b + 1) if 0 <= x <= last)
    return sorted(chosen)


def _print_plateau(schedule: Any, metrics: list | None, cuts: list, skipped: int, ignored: int, base_lr: float) -> None:
    rule = schedule.rule
    print(
        f"plateau: monitor {schedule.model.monitor} ({rule.mode}), factor {rule.factor:g}, patience {rule.patience}, "
        f"threshold {rule.threshold:g} ({rule.threshold_mode}), cooldown {rule.cooldown}"
    )
    if metrics is None:
        print("plateau: drawn without cuts (the time part base x warmup); pass --metrics FILE.csv to simulate cuts")
        return
    extra = f", {skipped} in warmup (not counted, as in training)" if skipped else ""
    extra += f", {ignored} at or after the end of the run ignored" if ignored else ""
    print(f"plateau: simulated {len(metrics)} evaluations{extra}: {len(cuts)} cut{'s' if len(cuts) != 1 else ''}")
    for c in cuts:
        cut = c.cut
        print(
            f"  cut at the evaluation after batch {c.batch - 1} (timestamp {c.batch}), from batch {c.batch} on: scale "
            f"{cut.old_scale:g} -> {cut.new_scale:g} (lr {base_lr * cut.old_scale:.4g} -> "
            f"{base_lr * cut.new_scale:.4g}); value {cut.value:.6g} vs best {cut.best:.6g}, "
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
    """A ``width x height`` character chart of ``ys`` against batches ``xs`` (``0 .. total - 1``); marks ``|``.

    Each column covers ``total / width`` batches and marks every row between the lowest and the highest value
    evaluated in it, so a cliff shows as a vertical stroke rather than a gap.
    """
    lo, hi = min(ys), max(ys)
    span = hi - lo

    def row(v: float) -> int:
        return 0 if span <= 0 else round((v - lo) / span * (height - 1))

    def column(batch: int) -> int:
        return min(width - 1, batch * width // max(total, 1))

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
    end = f"batch {total - 1}"
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
    marks: Sequence[Any],
    cuts: Sequence[Any],
    metrics: Sequence[tuple[int, float]] | None,
    monitor: str,
    title: str,
    subtitle: str,
    tokens_per_batch: int | None,
    ylabel: str,
    loss_curve: tuple[list[int], list[float]] | None = None,
) -> tuple[int, int]:
    """Draw the schedule to ``path``, each mark a labelled vertical line; return the image size in pixels."""
    from matplotlib.ticker import FuncFormatter

    from foundry_ext.figures import pyplot, save_figure

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(10, 5.2), dpi=100)
    try:
        if time_lrs is not None:
            ax.plot(xs, time_lrs, color="tab:gray", linestyle="--", linewidth=1.2, label="time part (base x warmup)")
            ax.plot(xs, lrs, color="tab:blue", linewidth=1.8, label="with simulated plateau cuts")
        else:
            ax.plot(xs, lrs, color="tab:blue", linewidth=1.8, label="learning rate")
        colors = ["tab:green", "tab:orange", "tab:purple", "tab:brown", "tab:olive", "tab:cyan"]
        named = [m for m in marks if not m.label.startswith("cut ")]
        for i, mark in enumerate(named[:12]):  # a legend entry per mark; beyond 12 (restarts, steps) lines only
            ax.axvline(
                mark.batch,
                color=colors[i % len(colors)],
                linestyle=":",
                linewidth=1.3,
                label=f"{mark.label} (batch {mark.batch})",
            )
        for mark in named[12:]:
            ax.axvline(mark.batch, color="tab:gray", linestyle=":", linewidth=0.8)
        if len(named) > 12:
            ax.plot([], [], color="tab:gray", linestyle=":", label=f"... {len(named) - 12} more marks")
        if cuts:
            index = {b: i for i, b in enumerate(xs)}
            cx = [c.batch for c in cuts]
            cy = [lrs[index[b]] for b in cx]
            ax.scatter(cx, cy, color="tab:red", marker="v", s=60, zorder=5, label="simulated cut")
            for i, c in enumerate(cuts):
                ax.annotate(
                    f"cut {i + 1}",
                    (c.batch, lrs[index[c.batch]]),
                    textcoords="offset points",
                    xytext=(4, 6),
                    fontsize=8,
                    color="tab:red",
                )
        if loss_curve is not None:
            law_ax = ax.twinx()
            law_ax.plot(*loss_curve, color="tab:red", linewidth=1.5, label="predicted loss (--law)")
            law_ax.set_ylabel("predicted loss (--law)", color="tab:red")
            law_ax.tick_params(axis="y", colors="tab:red")
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
        try:
            width, height = save_figure(fig, path)
        except (OSError, ValueError) as e:  # a missing folder, or an extension matplotlib cannot write
            raise UsageError(f"--out {path}: cannot write: {' '.join(str(e).split())}") from None
    finally:
        plt.close(fig)
    return width, height
