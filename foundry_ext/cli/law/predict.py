"""``foundry-ext law predict LAW.json (CONFIG.yaml | --trace RUN)``: the predicted loss curve, its band, CSV, PNG."""

from __future__ import annotations

import argparse
import csv
import time

from foundry_ext.cli import UsageError, check_output_paths
from foundry_ext.cli.law.inputs import (
    NO_CUTS,
    PLATEAU,
    check_scheduler_name,
    law_notes,
    read_law,
    warn,
    yaml_lrs,
)

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Predict the loss curve of a YAML's schedule or of a trace, with its band; print it, write the CSV and PNG."""
    import os

    import numpy as np

    from foundry_ext.law.predict import predict, predict_points
    from foundry_ext.law.reliability import band, extrapolation, refuse_reason
    from foundry_ext.law.runs import RunError, read_run
    from foundry_ext.runlog import is_mlflow

    check_output_paths(("--csv", args.csv), ("--out", args.out))
    if args.points < 2:
        raise UsageError(f"--points {args.points}: must be >= 2")
    law = read_law(args.law)
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
        if check_scheduler_name(args.config, args.overrides) == PLATEAU and not args.metrics:
            notes.append(f"{NO_CUTS}; pass --metrics FILE.csv (batch,value of the monitored metric) to replay them")
        lr, _ = yaml_lrs(args.config, args.overrides, args.metrics)
        source = args.config
    else:
        raise UsageError("give CONFIG.yaml (a train YAML) or --trace RUN.csv")
    if not np.any(lr > 0):
        raise UsageError(f"{source}: the LR is 0 at every batch (optimizer.lr 0?): the law needs a positive LR")
    law_notes(law, args.law)
    warn([*notes, *extrapolation(law.domain, lr)], args.strict)
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
        from foundry_ext.law.figure import draw_prediction
        from foundry_ext.law.trace import find_warmup

        try:
            draw_prediction(args.out, steps, lr_at, pred, b, measured, find_warmup(lr), f"{law.form} law: {source}")
        except (OSError, ValueError) as e:
            raise UsageError(f"--out {args.out}: cannot write: {' '.join(str(e).split())}") from None
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
