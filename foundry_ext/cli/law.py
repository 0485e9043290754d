"""``foundry-ext law fit|predict|tune``: fit a loss law on past runs, predict a YAML's loss curve, rank a grid.

Only the standard library is imported here (``--help`` stays fast); numpy, scipy and the preview in ``run()``.
See docs/law.md.
"""

from __future__ import annotations

import argparse
import csv
import time
from typing import TYPE_CHECKING

from foundry_ext.cli import UsageError, add_config_arguments, read_metrics

if TYPE_CHECKING:
    import numpy as np

    from foundry_ext.lr_pipeline import LRPipeline

__all__ = ["add_arguments", "run"]


FIT_HELP = "fit a loss law on two or more runs, check it leaving each run out, and write LAW.json"
PREDICT_HELP = "predict the loss curve of a train YAML's schedule (or of --trace), with a band and warnings"
TUNE_HELP = "rank a grid of YAML keys, or cooldown branches of a stable run, by predicted final loss with bands"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare ``fit``, ``predict`` and ``tune``."""
    from foundry_ext.law.forms import FORMS  # the form names alone: numpy and the laws load when a form is used

    sub = parser.add_subparsers(dest="law_command", required=True, metavar="ACTION")
    f = sub.add_parser("fit", help=FIT_HELP, description=FIT_HELP + " (docs/law.md)")
    f.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="a step,lr,loss CSV, an MLflow run folder (mlruns/<experiment>/<run>) or runs:/RUN_ID of "
        "MLFLOW_TRACKING_URI (a file store, a database or a tracking server)",
    )
    f.add_argument("--out", default="law.json", metavar="LAW.json", help="file to write (default: law.json)")
    f.add_argument("--law-form", choices=tuple(FORMS), default="multipower", help="the law (default: multipower)")
    f.add_argument(
        "--metric",
        default="metrics/eval/LanguageCrossEntropy",
        help="MLflow runs: the loss metric (default: metrics/eval/LanguageCrossEntropy)",
    )
    f.add_argument("--warmup", type=int, metavar="N", help="warmup batches of every run (default: found in the trace)")

    p = sub.add_parser("predict", help=PREDICT_HELP, description=PREDICT_HELP + " (docs/law.md)")
    p.add_argument("law", metavar="LAW.json")
    p.add_argument("config", nargs="?", metavar="CONFIG.yaml", help="an llm-foundry train YAML")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="overrides, as for train.py")
    p.add_argument(
        "--trace",
        metavar="RUN",
        help="predict for this run's LR instead of a YAML, its measured losses beside: a step,lr[,loss] CSV, "
        "an MLflow run folder or runs:/RUN_ID",
    )
    p.add_argument(
        "--metric",
        default="metrics/eval/LanguageCrossEntropy",
        help="an MLflow --trace: the loss metric (default: metrics/eval/LanguageCrossEntropy)",
    )
    p.add_argument("--metrics", metavar="FILE.csv", help="reduce_lr_on_plateau: replay the cuts (as plot --metrics)")
    p.add_argument("--points", type=int, default=1000, metavar="N", help="batches to predict at (default: 1000)")
    p.add_argument("--csv", metavar="FILE.csv", help="write step,lr,predicted_loss,predicted_low,predicted_high,...")
    p.add_argument("--out", metavar="FILE.png", help="draw the LR and the predicted loss with its band")
    p.add_argument("--strict", action="store_true", help="an extrapolation warning is an error (exit 2)")

    t = sub.add_parser("tune", help=TUNE_HELP, description=TUNE_HELP + " (docs/law.md)")
    t.add_argument("law", metavar="LAW.json")
    add_config_arguments(t, "max_duration=2000ba")
    t.add_argument(
        "--grid",
        action="append",
        metavar="KEY=V1,V2,...",
        help="a key and its values (repeatable; every combination is predicted)",
    )
    t.add_argument(
        "--branch-from",
        metavar="S1,S2,...",
        help="branch cooldowns from these batches of the YAML's (stable) run: with --end or --decay",
    )
    t.add_argument("--end", metavar="B", help="every branch ends at batch B (decay B - S): which branch point wins")
    t.add_argument("--decay", metavar="LEN1,...", help="decay lengths from each branch point (Nba, or a dur fraction)")
    t.add_argument("--shape", default="linear", metavar="SHAPE1,...", help="decay shapes (default: linear)")
    t.add_argument("--floor", type=float, default=0.0, metavar="ALPHA", help="the decay's end, x peak LR (default 0)")
    t.add_argument("--strict", action="store_true", help="an extrapolation warning is an error (exit 2)")


def run(args: argparse.Namespace) -> int:
    """Dispatch to the action, numpy's floating-point warnings off: a result that is not finite is refused in one line.

    An LR of 1e308 overflowed numpy's sums, which printed their ``RuntimeWarning`` lines (and numpy's source line)
    before the error line that names the problem.
    """
    import numpy as np

    with np.errstate(all="ignore"):
        return {"fit": _fit, "predict": _predict, "tune": _tune}[args.law_command](args)


def _check_out(option: str, path: str | None) -> None:
    """An output file must be writable where it is asked: its folder exists, and it is not a folder itself."""
    import os

    from foundry_ext.cli import check_output_paths

    check_output_paths((option, path))
    if path and os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a folder; expected a file name (e.g. {os.path.join(path, 'out')})")


def _fit(args: argparse.Namespace) -> int:
    from foundry_ext.law.fit import FitError, fit
    from foundry_ext.law.lawfile import write_law
    from foundry_ext.law.reliability import check, domain_of
    from foundry_ext.law.runs import RunError, read_runs

    if args.warmup is not None and args.warmup < 0:
        raise UsageError(f"--warmup {args.warmup}: must be >= 0")
    _check_out("--out", args.out)
    try:
        traces = read_runs(args.runs, args.metric, args.warmup)
        result = fit(traces, args.law_form)
    except (RunError, FitError) as e:
        raise UsageError(str(e)) from None
    print(f"{result.form} law fitted on {len(traces)} runs in {result.seconds:.2f}s ({result.starts} starting points)")
    print("  " + ", ".join(f"{k} {v:.6g}" for k, v in result.params.items()))
    print(f"  {'run':<28} {'losses':>6} {'warmup':>7} {'R^2':>8} {'mean rel':>9} {'worst rel':>9}")
    for q, tr in zip(result.runs, traces, strict=True):
        print(f"  {q.name:<28} {q.points:>6} {tr.warmup:>7} {q.r2:>8.5f} {q.mean_rel:>9.4%} {q.worst_rel:>9.4%}")
    started = time.perf_counter()
    reliability = check(traces, result)
    if reliability.checks:
        took = time.perf_counter() - started
        print(f"leave-one-run-out (the law refitted without each run predicts it; {took:.1f}s):")
        print(f"  {'run left out':<28} {'mean rel':>9} {'worst rel':>9} {'final rel':>9}")
        for c in reliability.checks:
            if c.checkable:
                final = "-" if c.final_rel is None else f"{c.final_rel:.4%}"
                print(f"  {c.name:<28} {c.mean_rel:>9.4%} {c.worst_rel:>9.4%} {final:>9}")
            else:
                print(f"  {c.name:<28} not checkable: {c.reason}")
    write_law(args.out, result, list(args.runs), reliability, domain_of(traces))
    print(f"verdict: {reliability.verdict} ({reliability.reason})")
    print(f"wrote {args.out}")
    return 0


def _read_law(path: str):
    """The LAW.json; its notes are printed by :func:`_law_notes` once the other inputs have passed."""
    from foundry_ext.law.lawfile import LawFileError, read_law_file

    try:
        return read_law_file(path)
    except LawFileError as e:
        raise UsageError(str(e)) from None


def _law_notes(law, path: str) -> None:
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


def _warn(lines: list[str], strict: bool) -> None:
    import sys

    for line in lines:
        if strict:
            raise UsageError(f"--strict: {line}")
        print(f"warning: {line}", file=sys.stderr)


def _check_scheduler_name(config: str, overrides: list[str]) -> str | None:
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


def _yaml_lrs(config: str, overrides: list[str], metrics_path: str | None = None) -> tuple[np.ndarray, LRPipeline]:
    """The LR of every batch of a train YAML and its pipeline (:func:`foundry_ext.law.predict.yaml_pipeline`).

    Raises:
        UsageError: the YAML, its schedule or ``--metrics`` is refused (one line).
    """
    from foundry_ext.config.durations import UnknownBatchesPerEpoch
    from foundry_ext.config.errors import ConfigError
    from foundry_ext.law.predict import yaml_pipeline
    from foundry_ext.lr_pipeline import ScheduleError

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


def _predict(args: argparse.Namespace) -> int:
    import os

    import numpy as np

    from foundry_ext.law.predict import predict, predict_points
    from foundry_ext.law.reliability import band, extrapolation, refuse_reason
    from foundry_ext.law.runs import RunError, read_run
    from foundry_ext.runlog import is_mlflow

    _check_out("--csv", args.csv)
    _check_out("--out", args.out)
    if args.points < 2:
        raise UsageError(f"--points {args.points}: must be >= 2")
    law = _read_law(args.law)
    measured = None
    notes: list[str] = []  # said as warnings with the law's, once every input is read
    if args.trace:
        if args.config:
            raise UsageError("give CONFIG.yaml or --trace RUN.csv, not both")
        if not is_mlflow(args.trace) and not os.path.isfile(args.trace):
            raise UsageError(f"--trace {args.trace}: no such file (expected a step,lr[,loss] CSV)")
        try:
            trace = read_run(args.trace, args.metric)
        except (RunError, OSError) as e:
            raise UsageError(f"--trace {e}") from None
        lr = trace.lr
        measured = dict(zip(trace.steps.tolist(), trace.loss.tolist(), strict=True))
        source = trace.name if is_mlflow(args.trace) else args.trace
    elif args.config:
        if _check_scheduler_name(args.config, args.overrides) == PLATEAU and not args.metrics:
            notes.append(f"{NO_CUTS}; pass --metrics FILE.csv (batch,value of the monitored metric) to replay them")
        lr, _ = _yaml_lrs(args.config, args.overrides, args.metrics)
        source = args.config
    else:
        raise UsageError("give CONFIG.yaml (a train YAML) or --trace RUN.csv")
    if not np.any(lr > 0):
        raise UsageError(f"{source}: the LR is 0 at every batch (optimizer.lr 0?): the law needs a positive LR")
    _law_notes(law, args.law)
    _warn([*notes, *extrapolation(law.domain, lr)], args.strict)
    started = time.perf_counter()
    first = int(np.argmax(lr > 0)) + 1  # no loss before the first batch with a positive LR (the law's area is 0)
    steps = predict_points(len(lr), args.points, list(measured) if measured else ())
    steps = steps[steps >= first]
    pred = predict(law.form, law.params, lr, steps)
    why = refuse_reason(law.form, law.params, steps, pred)
    if why:
        raise UsageError(f"{source}: {why}: the schedule is outside what the law describes")
    b = band(law.form, law.params, law.subfits, law.model_error, law.domain, lr, steps, pred)
    seconds = time.perf_counter() - started
    span = f" (band {b[0][-1]:.4f} to {b[1][-1]:.4f})" if b is not None else ""
    print(
        f"{source}: {len(lr)} batches; predicted {law.form} loss after the last batch: {pred[-1]:.4f}{span} "
        f"({len(steps)} points in {seconds:.2f}s)"
    )
    if b is None and law.verdict is not None:
        print("no band: the law was fitted on 2 runs (no leave-one-run-out sub-fits); fit on three or more for one")
    if measured:
        _print_measured(measured, steps, pred, b)
    lr_at = lr[np.minimum(steps, len(lr)) - 1]  # the LR of the last batch trained before the loss
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["step", "lr", "predicted_loss", "predicted_low", "predicted_high", "measured_loss"])
            for i, (s, a, p) in enumerate(zip(steps.tolist(), lr_at.tolist(), pred.tolist(), strict=True)):
                m = measured.get(s) if measured else None
                lo, hi = ("", "") if b is None else (f"{b[0][i]:.6f}", f"{b[1][i]:.6f}")
                w.writerow([s, repr(a), f"{p:.6f}", lo, hi, "" if m is None else repr(m)])
        print(f"wrote {args.csv} ({len(steps)} rows)")
    if args.out:
        from foundry_ext.law.trace import find_warmup

        _draw(args.out, steps, lr_at, pred, b, measured, find_warmup(lr), f"{law.form} law: {source}")
        print(f"wrote {args.out}")
    return 0


def _print_measured(measured: dict, steps, pred, b) -> None:
    """The last measured loss of a trace beside its prediction: the relative error, and whether the band holds it."""
    at = [i for i, s in enumerate(steps.tolist()) if measured.get(s) is not None]
    if not at:
        return
    i = at[-1]
    m = measured[int(steps[i])]
    where = "the last batch" if i == len(steps) - 1 else f"batch {int(steps[i])} (its last measured loss)"
    inside = "" if b is None else (", inside the band" if b[0][i] <= m <= b[1][i] else ", outside the band")
    print(f"measured after {where}: {m:.4f}; predicted {pred[i]:.4f} ({(pred[i] - m) / m:+.2%}{inside})")


def _draw(path: str, steps, lr, pred, band, measured, warmup: int, title: str) -> None:
    import matplotlib
    import numpy as np

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 5.2), dpi=100)
    try:
        ax.plot(steps, lr, color="tab:blue", label="learning rate")
        ax.set_xlabel("batch")
        ax.set_ylabel("learning rate", color="tab:blue")
        twin = ax.twinx()
        if band is not None:
            twin.fill_between(steps, band[0], band[1], color="tab:red", alpha=0.18, linewidth=0, label="band")
        twin.plot(steps, pred, color="tab:red", label="predicted loss")
        after = steps > warmup
        shown = [pred[after]]
        if band is not None:
            shown += [band[0][after], band[1][after]]
        if measured:
            twin.plot(list(measured), list(measured.values()), ".", color="black", markersize=3, label="measured")
            shown.append(np.array([v for s, v in measured.items() if s > warmup]))
        values = np.concatenate([v[np.isfinite(v)] for v in shown]) if shown else np.zeros(0)
        if len(values):  # the loss axis from after the warmup: its first losses would set the scale
            lo, hi = float(values.min()), float(values.max())
            pad = 0.05 * (hi - lo) or 0.01 * abs(hi) or 0.01
            twin.set_ylim(lo - pad, hi + pad)
        twin.set_ylabel("loss (after warmup)", color="tab:red")
        twin.legend(loc="upper right", fontsize=8)
        ax.set_title(title, fontsize=10)
        fig.tight_layout()
        try:
            fig.savefig(path)
        except (OSError, ValueError) as e:
            raise UsageError(f"--out {path}: cannot write: {' '.join(str(e).split())}") from None
    finally:
        plt.close(fig)


def _tune(args: argparse.Namespace) -> int:
    import sys

    from foundry_ext.config.errors import ConfigError
    from foundry_ext.law.tune import TuneError, combinations, parse_grid, rank, unresolved

    if bool(args.grid) == bool(args.branch_from):
        raise UsageError("give --grid KEY=V1,V2,... or --branch-from S1,... (with --end or --decay), one of them")
    law = _read_law(args.law)
    plateau = _check_scheduler_name(args.config, list(args.overrides)) == PLATEAU
    for spec in (args.grid or []) if plateau else []:
        key = spec.partition("=")[0].strip()
        if key.startswith("scheduler.") and key.removeprefix("scheduler.") in PLATEAU_CUT_KEYS:
            raise UsageError(
                f"--grid {key}: {PLATEAU}'s cuts come from the eval losses, which law tune does not have: every value "
                "predicts the same curve; tune the keys of its schedule (scheduler.t_warmup, max_duration, ...), or "
                "compare values with law predict --metrics"
            )
    started = time.perf_counter()
    try:
        if args.grid:
            grid = parse_grid(args.grid, args.config, list(args.overrides))
            combos = combinations(grid)
            rows = rank(law, lambda extra: _yaml_lrs(args.config, [*args.overrides, *extra])[0], combos)
            kind = "combinations"
        else:
            rows = _branches(args, law)
            kind = "branches"
    except TuneError as e:
        raise UsageError(str(e)) from None
    except ConfigError as e:
        raise UsageError.of_config(e) from None
    _law_notes(law, args.law)
    warned = sorted({w for c in rows for w in (c.warnings or [])})
    _warn([f"{NO_CUTS}: ranked as such"] if plateau else [], args.strict)
    _warn(warned, args.strict)
    print(f"{len(rows)} {kind} predicted in {time.perf_counter() - started:.2f}s ({law.form} law), best first:")
    for i, c in enumerate(rows, start=1):
        span = f"  [{c.low:.4f}, {c.high:.4f}]" if c.low is not None else ""
        print(f"  {i:>3}. {c.final:.4f}{span}  {' '.join(c.overrides)}")
    tied = unresolved(rows)
    if rows[0].low is None:
        print(f"best: {' '.join(rows[0].overrides)} (no band: the law was not checked on held-out runs)")
    elif tied:
        print(
            f"best: not resolvable: the bands of the first {tied + 1} overlap; the law's pick: "
            f"{' '.join(rows[0].overrides)}"
        )
    else:
        print(f"best: {' '.join(rows[0].overrides)}")
    if law.verdict is not None and law.verdict != "good":
        print(f"warning: the law's verdict is {law.verdict}: check the ranking on a run of your own", file=sys.stderr)
    return 0


def _branch_length(text: str, start: int, option: str) -> int:
    """``Nba``/``N`` batches, or ``Fdur``: the fraction F of the branched run ``start + LEN``, as anneal reads it."""
    from foundry_ext.config.durations import DurationError, dur_length

    t = text.strip()
    try:
        if t.endswith("dur"):
            f = float(t.removesuffix("dur"))
            if not 0 < f < 1:
                raise ValueError
            try:
                return dur_length(f, start)
            except DurationError as e:
                raise UsageError(f"{option} {text!r}: {e}") from None
        return int(t.removesuffix("ba"))
    except ValueError:
        raise UsageError(
            f"{option} {text!r}: expected batches (500ba) or a fraction of the branched run (0.2dur)"
        ) from None


def _branches(args: argparse.Namespace, law):
    import sys

    from foundry_ext.law.tune import MAX_CANDIDATES, branch_lr, rank
    from foundry_ext.schedules.wsd import DECAY_TYPES

    def ints(text: str, option: str) -> list[int]:
        items = [x.strip() for x in text.split(",")]
        try:
            values = [int(x.removesuffix("ba")) for x in items]
        except ValueError:
            raise UsageError(f"{option} {text!r}: expected batch counts, e.g. 2000,4000 or 2000ba") from None
        if any(v < 1 for v in values):
            raise UsageError(f"{option} {text!r}: every batch must be >= 1")
        return values

    starts = ints(args.branch_from, "--branch-from")
    shapes = [x.strip() for x in args.shape.split(",")]
    for shape in shapes:
        if shape not in DECAY_TYPES:
            raise UsageError(f"--shape {shape!r}: expected one of {', '.join(DECAY_TYPES)}")
    if not 0 <= args.floor < 1:
        raise UsageError(f"--floor {args.floor}: must be in [0, 1) (the decay's end as a fraction of the peak LR)")
    if (args.end is None) == (args.decay is None):
        raise UsageError("--branch-from needs --end B (every branch ends at B) or --decay LEN1,... (not both)")
    _, stable = _yaml_lrs(args.config, list(args.overrides))
    total = stable.total
    plans: list[tuple[int, int, str]] = []
    if args.end is not None:
        (end,) = ints(args.end, "--end")
        for s in starts:
            if s >= end:
                raise UsageError(
                    f"--branch-from {s}: must be before --end {end} (the decay would be {end - s} batches)"
                )
            plans += [(s, end - s, shape) for shape in shapes]
    else:
        for s in starts:
            for text in args.decay.split(","):
                n = _branch_length(text, s, "--decay")
                if n < 1:
                    raise UsageError(f"--decay {text!r}: the decay must be at least 1 batch")
                plans += [(s, n, shape) for shape in shapes]
    for s, n, _ in plans:
        if s > total:
            raise UsageError(f"--branch-from {s}: after the YAML's run ends ({total} batches): raise max_duration")
        if s + n > MAX_BATCHES:
            raise UsageError(f"branch from {s} over {n} batches: longer than {MAX_BATCHES:,} batches")
    # a branch is a run of its own, from the stable run's checkpoint at s to s + n: past the YAML's max_duration it
    # is a longer run, not the same budget spent differently, and anneal refuses it (anneal/branch.py, _check_budget)
    past = [(s, n, shape) for s, n, shape in plans if s + n > total]
    if past:
        shown = ", ".join(f"from={s} decay={n}ba (ends at {s + n})" for s, n in dict.fromkeys(p[:2] for p in past))
        print(
            f"note: not ranked, past the YAML's max_duration ({total} batches), as anneal refuses them: {shown}",
            file=sys.stderr,
        )
        plans = [p for p in plans if p not in past]
    if len(plans) > MAX_CANDIDATES:
        raise UsageError(f"{len(plans)} branches; at most {MAX_CANDIDATES}")
    if len(plans) < 2:
        within = f" within max_duration ({total} batches)" if past else ""
        count = f"{len(plans)} branch{'es' if len(plans) != 1 else ''}{within}"
        raise UsageError(f"{count}, nothing to rank; give two or more branch points, lengths or shapes")
    labels = {f"from={s} decay={n}ba end={s + n} shape={shape}": (s, n, shape) for s, n, shape in plans}

    def lrs_of(label: list[str]):
        s, n, shape = labels[" ".join(label)]
        return branch_lr(stable, s, n, shape, args.floor)

    return rank(law, lrs_of, [label.split() for label in labels])
