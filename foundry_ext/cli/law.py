"""``foundry-ext law fit|predict|tune``: fit a loss law on past runs, predict a YAML's loss curve, rank a grid.

Only the standard library is imported here (``--help`` stays fast); numpy, scipy and the preview in ``run()``.
See docs/law.md.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import time

from foundry_ext.cli import UsageError, add_config_arguments

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``fit``, ``predict`` and ``tune``."""
    sub = parser.add_subparsers(dest="law_command", required=True, metavar="ACTION")
    f = sub.add_parser("fit", help="fit a law on two or more runs and write LAW.json")
    f.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="a step,lr,loss CSV, an MLflow run folder (mlruns/<experiment>/<run>) or runs:/RUN_ID of "
        "MLFLOW_TRACKING_URI (a file store, a database or a tracking server)",
    )
    f.add_argument("--out", default="law.json", metavar="LAW.json", help="file to write (default: law.json)")
    f.add_argument(
        "--law-form", choices=("multipower", "tissue"), default="multipower", help="the law (default: multipower)"
    )
    f.add_argument(
        "--metric",
        default="metrics/eval/LanguageCrossEntropy",
        help="MLflow runs: the loss metric (default: metrics/eval/LanguageCrossEntropy)",
    )
    f.add_argument("--warmup", type=int, metavar="N", help="warmup batches of every run (default: found in the trace)")

    p = sub.add_parser("predict", help="predict the loss curve of a train YAML's schedule (or of --trace)")
    p.add_argument("law", metavar="LAW.json")
    p.add_argument("config", nargs="?", metavar="CONFIG.yaml", help="an llm-foundry train YAML")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="overrides, as for train.py")
    p.add_argument("--trace", metavar="RUN.csv", help="predict for this step,lr[,loss] trace instead of a YAML")
    p.add_argument("--metrics", metavar="FILE.csv", help="reduce_lr_on_plateau: replay the cuts (as plot --metrics)")
    p.add_argument("--points", type=int, default=1000, metavar="N", help="batches to predict at (default: 1000)")
    p.add_argument("--csv", metavar="FILE.csv", help="write step,lr,predicted_loss,measured_loss")
    p.add_argument("--out", metavar="FILE.png", help="draw the LR and the predicted loss")

    t = sub.add_parser("tune", help="rank every combination of a grid of YAML keys by predicted final loss")
    t.add_argument("law", metavar="LAW.json")
    add_config_arguments(t, "max_duration=2000ba")
    t.add_argument(
        "--grid",
        action="append",
        required=True,
        metavar="KEY=V1,V2,...",
        help="a key and its values (repeatable; every combination is predicted)",
    )


def run(args: argparse.Namespace) -> int:
    """Dispatch to the action."""
    return {"fit": _fit, "predict": _predict, "tune": _tune}[args.law_command](args)


def _fit(args: argparse.Namespace) -> int:
    from foundry_ext.law.fit import FitError, fit
    from foundry_ext.law.lawfile import write_law
    from foundry_ext.law.runs import RunError, read_runs

    if args.warmup is not None and args.warmup < 0:
        raise UsageError(f"--warmup {args.warmup}: must be >= 0")
    try:
        traces = read_runs(args.runs, args.metric, args.warmup)
        result = fit(traces, args.law_form)
    except (RunError, FitError) as e:
        raise UsageError(str(e)) from None
    write_law(args.out, result, list(args.runs))
    print(f"{result.form} law fitted on {len(traces)} runs in {result.seconds:.2f}s ({result.starts} starting points)")
    print("  " + ", ".join(f"{k} {v:.6g}" for k, v in result.params.items()))
    print(f"  {'run':<28} {'losses':>6} {'warmup':>7} {'R^2':>8} {'mean rel':>9} {'worst rel':>9}")
    for q, tr in zip(result.runs, traces, strict=True):
        print(f"  {q.name:<28} {q.points:>6} {tr.warmup:>7} {q.r2:>8.5f} {q.mean_rel:>9.4%} {q.worst_rel:>9.4%}")
    print(f"wrote {args.out}")
    return 0


def _read_law(path: str) -> tuple[str, list[float]]:
    from foundry_ext.law.lawfile import LawFileError, read_law

    try:
        return read_law(path)
    except LawFileError as e:
        raise UsageError(str(e)) from None


def _yaml_lrs(config: str, overrides: list[str], metrics_path: str | None = None):
    from foundry_ext.config.durations import UnknownBatchesPerEpoch
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.law.predict import yaml_lrs
    from foundry_ext.runlog import RunLogError, read_series

    try:
        metrics = read_series(metrics_path, None) if metrics_path else None
    except RunLogError as e:
        raise UsageError(f"--metrics {e}") from None
    try:
        return yaml_lrs(config, overrides, metrics)
    except UnknownBatchesPerEpoch:
        raise UsageError("max_duration or a scheduler duration is in 'ep': give it in batches ('ba')") from None
    except ConfigError as e:
        raise UsageError("; ".join(map(str, e.problems))) from None


def _predict(args: argparse.Namespace) -> int:
    import numpy as np

    from foundry_ext.law.predict import predict, predict_points
    from foundry_ext.law.runs import RunError, read_csv

    form, params = _read_law(args.law)
    measured = None
    if args.trace:
        if args.config:
            raise UsageError("give CONFIG.yaml or --trace RUN.csv, not both")
        try:
            trace = read_csv(args.trace)
        except (RunError, OSError) as e:
            raise UsageError(str(e)) from None
        lr = trace.lr
        measured = dict(zip(trace.steps.tolist(), trace.loss.tolist(), strict=True))
        source = args.trace
    elif args.config:
        lr = _yaml_lrs(args.config, args.overrides, args.metrics)
        source = args.config
    else:
        raise UsageError("give CONFIG.yaml (a train YAML) or --trace RUN.csv")
    if args.points < 2:
        raise UsageError(f"--points {args.points}: must be >= 2")
    started = time.perf_counter()
    steps = predict_points(len(lr), args.points, list(measured) if measured else ())
    pred = predict(form, params, lr, steps)
    seconds = time.perf_counter() - started
    print(
        f"{source}: {len(lr)} batches; predicted {form} loss after the last batch: {pred[-1]:.4f} "
        f"({len(steps)} points in {seconds:.2f}s)"
    )
    if measured and measured.get(int(steps[-1])) is not None:
        print(f"measured after the last batch: {measured[int(steps[-1])]:.4f}")
    lr_at = lr[np.minimum(steps, len(lr)) - 1]  # the LR of the last batch trained before the loss
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["step", "lr", "predicted_loss", "measured_loss"])
            for s, a, p in zip(steps.tolist(), lr_at.tolist(), pred.tolist(), strict=True):
                m = measured.get(s) if measured else None
                w.writerow([s, repr(a), f"{p:.6f}", "" if m is None else repr(m)])
        print(f"wrote {args.csv} ({len(steps)} rows)")
    if args.out:
        _draw(args.out, steps, lr_at, pred, measured, f"{form} law: {source}")
        print(f"wrote {args.out}")
    return 0


def _draw(path: str, steps, lr, pred, measured, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5.2), dpi=100)
    try:
        ax.plot(steps, lr, color="tab:blue", label="learning rate")
        ax.set_xlabel("batch")
        ax.set_ylabel("learning rate", color="tab:blue")
        twin = ax.twinx()
        twin.plot(steps, pred, color="tab:red", label="predicted loss")
        if measured:
            twin.plot(list(measured), list(measured.values()), ".", color="black", markersize=3, label="measured")
        twin.set_ylabel("loss", color="tab:red")
        twin.legend(loc="upper right", fontsize=8)
        ax.set_title(title, fontsize=10)
        fig.tight_layout()
        try:
            fig.savefig(path)
        except (OSError, ValueError) as e:
            raise UsageError(f"--out {path}: cannot write: {' '.join(str(e).split())}") from None
    finally:
        plt.close(fig)


def _grid(specs: list[str], config: str, overrides: list[str]) -> list[tuple[str, list[str]]]:
    """Parse ``KEY=V1,V2``; a key must be one the YAML has, or one its scheduler accepts (did-you-mean)."""
    from foundry_ext.catalog.registry import validate_block
    from foundry_ext.config.errors import ConfigError, did_you_mean
    from foundry_ext.config.train_yaml import load_train_config

    try:
        cfg = load_train_config(config, overrides)
    except ConfigError as e:
        raise UsageError("; ".join(map(str, e.problems))) from None
    block = cfg.get("scheduler") if isinstance(cfg.get("scheduler"), dict) else {}
    model = validate_block(block, "scheduler") if block else None
    sched_keys = set(block) | (set(type(model).model_fields) if model is not None else set())
    grid = []
    for spec in specs:
        key, sep, values = spec.partition("=")
        key = key.strip()
        if not sep or not values.strip():
            raise UsageError(f"--grid {spec!r}: expected KEY=V1,V2,... (e.g. scheduler.t_decay=0.1dur,0.2dur)")
        if key.startswith("scheduler."):
            sub = key.removeprefix("scheduler.")
            if sub not in sched_keys:
                options = sorted(f"scheduler.{k}" for k in sched_keys if k != "name")
                raise UsageError(
                    f"--grid {key}: scheduler {block.get('name')!r} has no key {sub!r}{did_you_mean(key, options)}"
                )
        else:
            node = cfg
            for part in key.split("."):
                if not isinstance(node, dict) or part not in node:
                    top = sorted(cfg) + sorted(f"scheduler.{k}" for k in sched_keys)
                    raise UsageError(f"--grid {key}: the YAML has no key {key!r}{did_you_mean(key, top)}")
                node = node[part]
        grid.append((key, [v.strip() for v in values.split(",") if v.strip()]))
    return grid


def _tune(args: argparse.Namespace) -> int:
    from foundry_ext.law.predict import predict

    form, params = _read_law(args.law)
    grid = _grid(args.grid, args.config, list(args.overrides))
    started = time.perf_counter()
    rows = []
    for combo in itertools.product(*(values for _, values in grid)):
        extra = [f"{k}={v}" for (k, _), v in zip(grid, combo, strict=True)]
        lr = _yaml_lrs(args.config, [*args.overrides, *extra])
        final = float(predict(form, params, lr, [len(lr)])[0])  # type: ignore[arg-type]
        rows.append((final, extra))
    rows.sort(key=lambda r: r[0])
    print(f"{len(rows)} combinations predicted in {time.perf_counter() - started:.2f}s ({form} law), best first:")
    for rank, (final, extra) in enumerate(rows, start=1):
        print(f"  {rank:>3}. {final:.4f}  {' '.join(extra)}")
    print(f"best: {' '.join(rows[0][1])}")
    return 0
