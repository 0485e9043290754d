"""The loss law on this package's own tiny model trained on CPU: the issue's evidence (b) and (c).

Run: ``nice -n 10 .venv/bin/python bench/bench_law_tiny.py --jobs 2`` (about 15-20 minutes on 2 CPU cores at the
default 1,000 batches); ``--quick`` to smoke.

The model and data of ``bench_quality.py``'s long scenario (MPT d_model 32, 1 layer, 33k parameters, peak LR 1e-2,
batches of 8 sequences, warmup 100 batches), at a shorter horizon (``--batches``, default 1,000 instead of 5,000, so
that 42 runs fit in the time there was), evaluated on the whole validation split every ``--eval-interval`` batches.

(b) Per seed, a multi-power law is fitted on three runs (constant, cosine to 0.1, a two-stage step to 0.3 at half
the run) and predicts the final eval loss of five held-out runs from the LR each batch really trained with: WSD
linear over the last 20%, WSD 1-sqrt over the last 40%, a cosine twice as long, a two-step decay, and a
``reduce_lr_on_plateau`` run's trace (its cuts are known only after the run: the law is given the recorded LRs).
Reported: prediction error of the final loss per schedule (mean and max over seeds) against the seed-to-seed noise
(the standard deviation of the measured final loss over seeds), and whether the predicted ranking of the held-out
schedules equals the measured one (by their means over seeds).

(c) ``law tune``'s choice among six WSD settings (t_decay 0.1, 0.2, 0.4 of the run x linear, 1-sqrt), with the law
fitted on all nine fitting runs, against the same six trained for real, 3 seeds each.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import _common
import bench_quality

from foundry_ext.law.fit import fit
from foundry_ext.law.predict import predict
from foundry_ext.law.trace import Trace

W = "100ba"


def configs(batches: int) -> dict[str, tuple[dict[str, Any], int]]:
    """name -> (scheduler block, batches)."""
    wsd = {"name": "warmup_stable_decay", "t_warmup": W, "alpha_f": 0.1}
    out: dict[str, tuple[dict[str, Any], int]] = {
        "fit: constant": ({"name": "constant_with_warmup", "t_warmup": W}, batches),
        "fit: cosine": ({"name": "cosine_with_warmup", "t_warmup": W, "alpha_f": 0.1}, batches),
        "fit: two-stage": ({"name": "multistep_with_warmup", "t_warmup": W, "milestones": [f"{batches // 2}ba"],
                            "gamma": 0.3}, batches),
        "wsd linear 20%": ({**wsd, "t_decay": "0.2dur", "decay_type": "linear"}, batches),
        "wsd sqrt 40%": ({**wsd, "t_decay": "0.4dur", "decay_type": "sqrt"}, batches),
        "cosine x2": ({"name": "cosine_with_warmup", "t_warmup": W, "alpha_f": 0.1}, 2 * batches),
        "step decay": ({"name": "multistep_with_warmup", "t_warmup": W,
                        "milestones": [f"{int(batches * 0.4)}ba", f"{int(batches * 0.7)}ba"], "gamma": 0.5}, batches),
        "plateau trace": (bench_quality._plateau("recommended", None), batches),
    }  # fmt: skip
    for t_decay in ("0.1dur", "0.2dur", "0.4dur"):
        for shape in ("linear", "sqrt"):
            out[f"grid: {t_decay} {shape}"] = ({**wsd, "t_decay": t_decay, "decay_type": shape}, batches)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=1000)
    parser.add_argument("--eval-interval", type=int, default=50)
    parser.add_argument("--seeds", type=int, nargs="+", default=[17, 18, 19])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_law_tiny.json"))
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-grid", action="store_true", help="(b) only: skip the six WSD runs of (c)")
    parser.add_argument("--from-json", type=Path, help="report on the runs of an earlier --out file, training nothing")
    parser.add_argument("--fit-from", type=int, default=0, help="fit on the losses from this batch on only")
    parser.add_argument("--law-form", choices=("multipower", "tissue"), default="multipower")
    args = parser.parse_args(argv)
    if args.from_json is not None:
        runs = {
            name: {int(s): r for s, r in by_seed.items()}
            for name, by_seed in json.loads(args.from_json.read_text()).items()
        }
        args.seeds = sorted({s for by_seed in runs.values() for s in by_seed})
        args.batches = len(runs["fit: constant"][args.seeds[0]]["lr"])
        args.eval_interval = runs["fit: constant"][args.seeds[0]]["evals"][0][0]
        print(report(runs, args))
        return 0
    if args.quick:
        args.batches, args.eval_interval, args.seeds = 40, 4, [17]
    data = _common.ensure_data(args.data)
    table = configs(args.batches)
    scen = bench_quality.SCENARIOS["long"]
    if args.no_grid:
        table = {n: v for n, v in table.items() if not n.startswith("grid: ")}
    runs: dict[str, dict[int, dict[str, Any]]] = {name: {} for name in table}
    results = {}
    for batches in sorted({b for _, b in table.values()}):
        names = [n for n, (_, b) in table.items() if b == batches]
        ns = argparse.Namespace(seeds=args.seeds, configs=names, quick=args.quick, batches=batches,
                                eval_interval=args.eval_interval, batch_size=8, jobs=args.jobs)  # fmt: skip
        scenario = bench_quality.Scenario("law", batches, 8, args.eval_interval, 1e-2,
                                          {n: table[n][0] for n in names}, (), (batches, args.eval_interval),
                                          scen.overrides, Path("/dev/null"))  # fmt: skip
        results.update(bench_quality.run_all(ns, scenario, data))
    for name, rs in results.items():
        for r in rs:
            runs[name][r["seed"]] = {"lr": r["lr"], "evals": r["evals"]}
    args.out.write_text(json.dumps(runs))
    print(report(runs, args))
    return 0


def trace_of(name: str, run: dict[str, Any], start: int = 0) -> Trace:
    """The run as a law trace, with the losses measured from batch ``start`` on."""
    evals = [(b, v) for b, v in run["evals"] if b >= start]
    return Trace(name, np.array(run["lr"]), np.array([b for b, _ in evals]), np.array([v for _, v in evals]))


def report(runs: dict[str, dict[int, dict[str, Any]]], args: argparse.Namespace) -> str:
    seeds = args.seeds
    fit_names = [n for n in runs if n.startswith("fit: ")]
    held = [n for n in runs if not n.startswith(("fit: ", "grid: "))]
    form, start = args.law_form, args.fit_from
    lines = [f"Horizon {args.batches} batches, eval every {args.eval_interval}, seeds {seeds}; {form} law fitted on "
             f"the losses from batch {start} on.", "",
             "| schedule | measured final (mean) | seed sd | predicted (mean) | error mean | error max |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    preds: dict[str, list[float]] = {n: [] for n in runs}
    fits = {}
    for seed in seeds:
        law = fit([trace_of(n, runs[n][seed], start) for n in fit_names], form)
        fits[seed] = law
        for n in runs:
            lr = np.array(runs[n][seed]["lr"])
            preds[n].append(float(predict(form, list(law.params.values()), lr, np.array([len(lr)]))[0]))
    measured = {n: [runs[n][s]["evals"][-1][1] for s in seeds] for n in runs}
    for n in fit_names + held:
        err = [abs(p - m) for p, m in zip(preds[n], measured[n], strict=True)]
        sd = statistics.stdev(measured[n]) if len(seeds) > 1 else float("nan")
        lines.append(f"| {n} | {statistics.mean(measured[n]):.4f} | {sd:.4f} | {statistics.mean(preds[n]):.4f} | "
                     f"{statistics.mean(err):.4f} | {max(err):.4f} |")  # fmt: skip
    order_m = sorted(held, key=lambda n: statistics.mean(measured[n]))
    order_p = sorted(held, key=lambda n: statistics.mean(preds[n]))
    lines += ["", f"measured ranking (best first): {order_m}", f"predicted ranking: {order_p}",
              f"equal: {order_m == order_p}"]  # fmt: skip
    for seed, law in fits.items():
        worst = max(q.worst_rel for q in law.runs)
        lines.append(f"seed {seed} law: " + ", ".join(f"{k} {v:.4g}" for k, v in law.params.items())
                     + f"; fit worst rel. error {worst:.3%}")  # fmt: skip
    grid = [n for n in runs if n.startswith("grid: ")]
    if grid:
        law = fit([trace_of(f"{n} {s}", runs[n][s], start) for n in fit_names for s in seeds], form)
        p = {n: float(predict(form, list(law.params.values()), np.array(runs[n][seeds[0]]["lr"]),
                              np.array([len(runs[n][seeds[0]]["lr"])]))[0]) for n in grid}  # fmt: skip
        m = {n: statistics.mean(measured[n]) for n in grid}
        best_p, best_m = min(grid, key=p.get), min(grid, key=m.get)
        lines += ["", "| WSD setting | predicted final | measured final (mean of seeds) |", "|---|---|---|"]
        lines += [f"| {n.removeprefix('grid: ')} | {p[n]:.4f} | {m[n]:.4f} |" for n in grid]
        noise = statistics.mean(statistics.stdev(measured[n]) for n in grid) if len(seeds) > 1 else float("nan")
        lines.append(f"law's best: {best_p} (measured {m[best_p]:.4f}); grid's best: {best_m} ({m[best_m]:.4f}); "
                     f"gap {m[best_p] - m[best_m]:.4f} vs seed sd {noise:.4f}")  # fmt: skip
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
