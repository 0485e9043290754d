"""``foundry-ext law fit|predict|tune``: fit a loss law on past runs, predict a YAML's loss curve, rank a grid.

Only the standard library is imported here (``--help`` stays fast); numpy, scipy and the LR pipeline when an action
runs. One module per action: :mod:`.fit`, :mod:`.predict`, :mod:`.tune`; what they share (LAW.json, the YAML's LR,
warnings, output paths) is :mod:`.inputs`. The work is :mod:`foundry_ext.law`'s. See docs/law.md.
"""

from __future__ import annotations

import argparse

from foundry_ext.cli import add_config_arguments

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

    from foundry_ext.cli.law import fit, predict, tune

    with np.errstate(all="ignore"):
        return {"fit": fit.run, "predict": predict.run, "tune": tune.run}[args.law_command](args)
