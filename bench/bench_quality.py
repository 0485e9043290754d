"""Eval cross-entropy of a tiny MPT on the demo corpus under several LR schedules, three seeds each, two scenarios.

Run: ``.venv/bin/python bench/bench_quality.py`` (the short scenario, about 14 minutes on 2 CPU cores, 6 with
``--jobs 2``), ``--scenario long`` (about 32 minutes with ``--jobs 2``), ``--scenario all`` (both: 39 minutes with
``--jobs 2``, measured in docs/benchmarks.md section 8); ``--quick`` to smoke.

Scenario ``short``: ``yamls/tiny-wsd.yaml`` (MPT, d_model 64, 2 layers, 141k parameters, 128-token sequences),
300 batches of 8 sequences, peak LR 3e-3 (AdamW), evaluation every 30 batches, eight schedules that warm up for
20 batches and, where they decay, end at 0.1 of the peak. The loss is still falling fast at the end: no plateau.

Scenario ``long``: the loss flattens. A smaller model (d_model 32, 1 layer, 2 heads, 33k parameters) at a higher LR
(1e-2), 5,000 batches of 8 sequences (about 10 epochs of the demo corpus), warmup 100 batches, evaluation every
125 batches. Constant, cosine and WSD with the budget known, and ``reduce_lr_on_plateau`` on a constant and on a WSD
base with two settings each, plus torch's default threshold on the constant base (``PLATEAU_SETTINGS``;
``recommended`` is what ``yamls/tiny-plateau.yaml`` ships). The report adds how flat the constant-LR curve is
(least-squares slope of its eval loss over the last third), the eval noise (the standard deviation of the residuals
of that fit), and the eval loss at one half and three quarters of the run: what a user who stops there gets.

Both: evaluation on the whole validation split (256 sequences); the seed (``variables.global_seed``) sets both the
initialisation and the data order, and all configs see the same seeds. Every run goes through ``train.py``
(llm-foundry's ``train_from_yaml``) with torch on one thread, in this process (``--jobs 1``) or in ``--jobs``
worker processes; CPU runs are deterministic, so the results do not depend on ``--jobs`` or on the machine's load
(only the times do). Output: a Markdown table per scenario and a plot (``docs/img/quality.png``,
``docs/img/quality-long.png``; ``--plot`` for another place).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import json
import math
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common

# -- the short scenario (unchanged since the first version of this benchmark) ---------------------------------------

WARMUP = "20ba"
# Sensitive on purpose, so that it engages within the budget: halve the LR whenever an evaluation improves on the best
# by less than 3% (relative). With torch's defaults (patience 10, 1e-4) nothing would happen in 10 evaluations, and
# an earlier setting (patience 0, 0.02 nats absolute) never cut: the eval loss still fell by more at every evaluation.
PLATEAU = {"patience": 0, "factor": 0.5, "threshold": 0.03, "threshold_mode": "rel"}
WSD = {"name": "warmup_stable_decay", "t_warmup": WARMUP, "t_decay": "0.2dur", "alpha_f": 0.1}

CONFIGS: dict[str, dict[str, Any]] = {
    "constant_with_warmup": {"name": "constant_with_warmup", "t_warmup": WARMUP},
    "cosine_with_warmup": {"name": "cosine_with_warmup", "t_warmup": WARMUP, "alpha_f": 0.1},
    "wsd linear": {**WSD, "decay_type": "linear"},
    "wsd sqrt": {**WSD, "decay_type": "sqrt"},
    "wsd cosine": {**WSD, "decay_type": "cosine"},
    "wsd square": {**WSD, "decay_type": "square"},
    "plateau (constant base)": {"name": "reduce_lr_on_plateau", "t_warmup": WARMUP, **PLATEAU},
    "plateau (WSD base)": {"name": "reduce_lr_on_plateau", **PLATEAU, "base": {**WSD, "decay_type": "linear"}},
}

# -- the long scenario ------------------------------------------------------------------------------------------------

LONG_WARMUP = "100ba"
# The plateau settings compared. The threshold is absolute and set from the eval noise measured on the constant-LR
# runs of this scenario (the residual sd of the eval loss over the flat last third, reported with the table):
# improvements smaller than the noise are not improvements. `recommended` is what yamls/tiny-plateau.yaml ships
# (tests/bench/test_bench_smoke.py checks that they agree).
PLATEAU_SETTINGS: dict[str, dict[str, Any]] = {
    "recommended": {"patience": 2, "factor": 0.5, "threshold": 0.003, "threshold_mode": "abs"},
    "patient": {"patience": 5, "factor": 0.2, "threshold": 0.003, "threshold_mode": "abs"},
    # torch's default threshold (1e-4 relative, ~0.0001 nats here: far below the noise), on the constant base only
    "torch-threshold": {"patience": 2, "factor": 0.5, "threshold": 1.0e-4, "threshold_mode": "rel"},
}
LONG_WSD = {"name": "warmup_stable_decay", "t_warmup": LONG_WARMUP, "t_decay": "0.2dur", "decay_type": "linear",
            "alpha_f": 0.1}  # fmt: skip


def _plateau(setting: str, base: dict[str, Any] | None) -> dict[str, Any]:
    if base is None:
        return {"name": "reduce_lr_on_plateau", "t_warmup": LONG_WARMUP, **PLATEAU_SETTINGS[setting]}
    # The base warms up; a t_warmup here too would multiply a second ramp in (a quadratic warmup).
    return {"name": "reduce_lr_on_plateau", **PLATEAU_SETTINGS[setting], "base": base}


LONG_CONFIGS: dict[str, dict[str, Any]] = {
    "constant_with_warmup": {"name": "constant_with_warmup", "t_warmup": LONG_WARMUP},
    "cosine_with_warmup": {"name": "cosine_with_warmup", "t_warmup": LONG_WARMUP, "alpha_f": 0.1},
    "wsd linear": LONG_WSD,
    **{f"plateau {s} (constant base)": _plateau(s, None) for s in PLATEAU_SETTINGS},
    **{f"plateau {s} (WSD base)": _plateau(s, LONG_WSD) for s in ("recommended", "patient")},
}
# The rows whose schedule depends on max_duration: they must know the run's length in advance.
KNOWS_BUDGET = {name for name, block in LONG_CONFIGS.items() if block["name"] != "constant_with_warmup" and (
    block["name"] != "reduce_lr_on_plateau" or "base" in block)}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One comparison: the run shape, the configs, and what changes from ``yamls/tiny-wsd.yaml``."""

    name: str
    batches: int
    batch_size: int
    eval_interval: int
    peak_lr: float
    configs: dict[str, dict[str, Any]]
    quick_configs: tuple[str, ...]
    quick_shape: tuple[int, int]  # --quick: (batches, eval_interval)
    overrides: dict[str, Any]
    plot: Path


IMG = _common.ROOT / "docs" / "img"
SCENARIOS = {
    "short": Scenario(
        "short",
        300,
        8,
        30,
        3.0e-3,
        CONFIGS,
        ("cosine_with_warmup", "plateau (WSD base)"),
        (6, 3),
        {},
        IMG / "quality.png",
    ),
    "long": Scenario(
        "long",
        5000,
        8,
        125,
        1.0e-2,
        LONG_CONFIGS,
        ("constant_with_warmup", "plateau recommended (constant base)"),
        (8, 2),
        {"model.d_model": 32, "model.n_layers": 1, "model.n_heads": 2, "optimizer.lr": 1.0e-2},
        IMG / "quality-long.png",
    ),
}


# -- running ----------------------------------------------------------------------------------------------------------


def train_one(data: str, scheduler: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """One run (in this process or a worker): its curves, CPU and wall seconds."""
    import torch

    torch.set_num_threads(1)  # see bench_training.py: faster and steadier on a shared 2-core machine
    cfg = _common.make_config(Path(data), scheduler, **overrides)
    cpu, wall = time.process_time(), time.perf_counter()
    rec = _common.run(cfg)
    scales = rec.plateau_scale
    return {
        "evals": rec.evals,
        "lr": rec.lr,
        "loss": rec.loss,
        "cuts": [b for b in range(1, len(scales)) if scales[b] != scales[b - 1]],  # first batch after each cut
        "n_params": rec.n_params,
        "cpu_s": time.process_time() - cpu,
        "s": time.perf_counter() - wall,
    }


def _worker_init() -> None:
    """Pay the imports before the first run's CPU time is measured."""
    import llmfoundry.command_utils  # noqa: F401  (train.py's import: seconds of CPU)
    import torch

    torch.set_num_threads(1)
    _common.register_recorder()


def run_all(args: argparse.Namespace, scenario: Scenario, data: Path) -> dict[str, list[dict[str, Any]]]:
    jobs = []
    for seed in args.seeds:  # seed-major: a slow spell of the machine does not hit one config only
        for name in args.configs:
            scheduler = json.loads(json.dumps(scenario.configs[name]))
            if args.quick:
                for block in (scheduler, scheduler.get("base") or {}):
                    if "t_warmup" in block:
                        block["t_warmup"] = "2ba"
            overrides = {
                **scenario.overrides,
                "max_duration": f"{args.batches}ba",
                "eval_interval": f"{args.eval_interval}ba",
                "eval_subset_num_batches": -1,
                "global_train_batch_size": args.batch_size,
                "device_train_microbatch_size": args.batch_size,
                "variables.global_seed": seed,
            }
            jobs.append((seed, name, scheduler, overrides))
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in args.configs}

    def done(seed: int, name: str, run: dict[str, Any]) -> None:
        final = run["evals"][-1]
        assert final[0] == args.batches, f"last evaluation at batch {final[0]}, not at the end"
        results[name].append({"seed": seed, "final": final[1], **run})
        print(
            f"{scenario.name} seed {seed} {name}: final eval CE {final[1]:.4f} "
            f"({run['s']:.0f} s, {run['cpu_s']:.0f} s CPU, load {os.getloadavg()[0]:.1f})",
            file=sys.stderr,
            flush=True,
        )

    if args.jobs <= 1:
        _worker_init()
        for seed, name, scheduler, overrides in jobs:
            done(seed, name, train_one(str(data), scheduler, overrides))
    else:
        # Worker processes, each one run at a time on one torch thread: two runs use the two cores of the machine.
        spawn = multiprocessing.get_context("spawn")
        with concurrent.futures.ProcessPoolExecutor(args.jobs, mp_context=spawn, initializer=_worker_init) as pool:
            futures = {pool.submit(train_one, str(data), s, o): (seed, name) for seed, name, s, o in jobs}
            for future in concurrent.futures.as_completed(futures):
                done(*futures[future], future.result())
    for runs in results.values():
        runs.sort(key=lambda r: args.seeds.index(r["seed"]))
    return results


# -- reporting --------------------------------------------------------------------------------------------------------


def eval_at(run: dict[str, Any], batch: int) -> float:
    for b, value in run["evals"]:
        if b == batch:
            return value
    raise AssertionError(f"no evaluation at batch {batch}; eval_interval must divide it")


def flatness(run: dict[str, Any], batches: int) -> dict[str, float]:
    """Least-squares line through the evaluations of the last third: slope, drop over the third, residual sd."""
    points = [(b, v) for b, v in run["evals"] if b >= batches - batches // 3]
    xs, ys = [float(b) for b, _ in points], [v for _, v in points]
    mx, my = statistics.mean(xs), statistics.mean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    residuals = [y - (my + slope * (x - mx)) for x, y in zip(xs, ys, strict=True)]
    return {
        "slope_per_1000": 1000 * slope,
        "drop": -slope * (xs[-1] - xs[0]),
        "noise": statistics.stdev(residuals) if len(residuals) > 2 else math.nan,
        "first": xs[0],
        "intercept": my - slope * mx,
        "slope": slope,
    }


def flatness_line(constant: list[dict[str, Any]], batches: int, eval_interval: int) -> str:
    """How flat the constant-LR eval curve is over the last third, against the eval noise, per seed."""
    flat = [flatness(r, batches) for r in constant]
    noise = statistics.mean(f["noise"] for f in flat)
    per_eval = statistics.mean(f["slope"] for f in flat) * eval_interval
    return (
        f"Constant LR over the last third (from batch {flat[0]['first']:.0f}), per seed: slope "
        + ", ".join(f"{f['slope_per_1000']:+.4f}" for f in flat)
        + " nats per 1000 batches (drop over the third "
        + ", ".join(f"{f['drop']:.4f}" for f in flat)
        + "); eval noise (sd of the residuals of that line) "
        + ", ".join(_fmt(f["noise"]) for f in flat)
        + f", mean {_fmt(noise)} nats; the trend per evaluation ({per_eval:+.4f} nats) is "
        + (f"{abs(per_eval) / noise:.2f}x the noise." if noise > 0 else "- x the noise.")
    )


def _sd(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else math.nan


def _fmt(value: float, digits: int = 4) -> str:
    return "-" if math.isnan(value) else f"{value:.{digits}f}"


def report_short(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace, scenario: Scenario) -> str:
    rows = []
    for name, runs in results.items():
        finals = [r["final"] for r in runs]
        final_lr = runs[0]["lr"][-1] / scenario.peak_lr
        rows.append((statistics.mean(finals), name, _sd(finals), min(finals), max(finals), finals, final_lr))
    rows.sort()
    best = rows[0][0]
    lines = [
        f"{args.batches} batches of {args.batch_size} x 128 tokens ({args.batches * args.batch_size * 128:,} tokens), "
        f"seeds {', '.join(map(str, args.seeds))}; eval cross-entropy (nats/token) on the whole validation split "
        f"after the last batch. Ranked by mean; sd = sample standard deviation over seeds.",
        "",
        "| rank | schedule | final eval CE, mean | sd | min-max | vs best | per seed | last LR / peak (seed "
        f"{args.seeds[0]}) |",
        "|---:|---|---:|---:|---:|---:|---|---:|",
    ]
    for i, (mean, name, sd, lo, hi, finals, final_lr) in enumerate(rows, 1):
        per_seed = ", ".join(f"{f:.4f}" for f in finals)
        lines.append(
            f"| {i} | {name} | {mean:.4f} | {_fmt(sd)} | {lo:.4f}-{hi:.4f} | {mean - best:+.4f} | {per_seed} | "
            f"{final_lr:.3f} |"
        )
    lines.append("")
    if "constant_with_warmup" in results:
        lines += [flatness_line(results["constant_with_warmup"], args.batches, args.eval_interval), ""]
    lines.append(_time_line(results))
    return "\n".join(lines)


def report_long(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace, scenario: Scenario) -> str:
    n, half, three_q = args.batches, args.batches // 2, 3 * args.batches // 4
    lines = [
        f"{n} batches of {args.batch_size} x 128 tokens ({n * args.batch_size * 128:,} tokens), model of "
        f"{next(iter(results.values()))[0]['n_params']:,} parameters, peak LR {scenario.peak_lr:g}, evaluation "
        f"every {args.eval_interval} batches, seeds {', '.join(map(str, args.seeds))}. Eval cross-entropy "
        f"(nats/token, whole validation split): mean (sd over seeds). 'vs constant': the paired difference to "
        f"constant_with_warmup in the same seed, mean (sd). Ranked by the final mean.",
        "",
    ]
    constant = results.get("constant_with_warmup")
    if constant:
        lines += [flatness_line(constant, n, args.eval_interval), ""]
    lines += [
        "| rank | schedule | knows the budget | final | vs constant | at 1/2 | at 3/4 | cuts at batch (per seed) | "
        "last LR / peak |",
        "|---:|---|---|---:|---:|---:|---:|---|---:|",
    ]
    rows = []
    for name, runs in results.items():
        finals = [r["final"] for r in runs]
        rows.append((statistics.mean(finals), name, runs))
    rows.sort(key=lambda row: row[0])
    for i, (mean, name, runs) in enumerate(rows, 1):
        finals = [r["final"] for r in runs]
        at_half = [eval_at(r, half) for r in runs]
        at_3q = [eval_at(r, three_q) for r in runs]
        if constant:
            diffs = [r["final"] - c["final"] for r, c in zip(runs, constant, strict=True)]
            vs = f"{statistics.mean(diffs):+.4f} ({_fmt(_sd(diffs))})"
        else:
            vs = "-"
        cuts = "; ".join(",".join(map(str, r["cuts"])) or "none" for r in runs) if "plateau" in name else "-"
        last_lr = "/".join(f"{r['lr'][-1] / scenario.peak_lr:.3g}" for r in runs)
        lines.append(
            f"| {i} | {name} | {'yes' if name in KNOWS_BUDGET else 'no'} | {mean:.4f} ({_fmt(_sd(finals))}) | {vs} "
            f"| {statistics.mean(at_half):.4f} ({_fmt(_sd(at_half))}) | {statistics.mean(at_3q):.4f} "
            f"({_fmt(_sd(at_3q))}) | {cuts} | {last_lr} |"
        )
    lines.append("")
    lines.append(_time_line(results))
    return "\n".join(lines)


def _time_line(results: dict[str, list[dict[str, Any]]]) -> str:
    runs = [r for rs in results.values() for r in rs]
    wall, cpu = sum(r["s"] for r in runs), sum(r["cpu_s"] for r in runs)
    return (
        f"{len(runs)} runs: {wall / 60:.1f} min of training wall-clock summed over runs, {cpu / 60:.1f} min of CPU "
        f"({cpu / len(runs):.0f} s CPU per run)."
    )


# -- plotting ---------------------------------------------------------------------------------------------------------


def _mean_curve(runs: list[dict[str, Any]]) -> tuple[list[int], list[float]]:
    batches = [b for b, _ in runs[0]["evals"]]
    return batches, [statistics.mean(r["evals"][k][1] for r in runs) for k in range(len(batches))]


def plot_short(results: dict[str, list[dict[str, Any]]], path: Path, args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_lr, ax_loss, ax_eval) = plt.subplots(3, 1, figsize=(9, 11), sharex=True)
    colors = plt.get_cmap("tab10")
    for i, (name, runs) in enumerate(results.items()):
        color = colors(i)
        style = "--" if name.startswith("plateau") else "-"
        lrs = runs[0]["lr"]
        ax_lr.plot(range(1, len(lrs) + 1), lrs, style, color=color, label=name, lw=1.4)
        # Train loss: mean over seeds, smoothed by an exponential moving average (per-batch loss is noisy).
        n = min(len(r["loss"]) for r in runs)
        mean_loss = [statistics.mean(r["loss"][k] for r in runs) for k in range(n)]
        ema, smooth = mean_loss[0], []
        for value in mean_loss:
            ema = 0.9 * ema + 0.1 * value
            smooth.append(ema)
        ax_loss.plot(range(1, n + 1), smooth, style, color=color, lw=1.2)
        ax_eval.plot(*_mean_curve(runs), style, color=color, marker="o", ms=3, lw=1.2)
    ax_lr.set_ylabel(f"LR (seed {args.seeds[0]})")
    ax_lr.legend(fontsize=8, ncol=2)
    ax_lr.set_title(
        f"Tiny MPT (141k params) on the demo corpus: {args.batches} batches x {args.batch_size} seqs, "
        f"{len(args.seeds)} seeds"
    )
    ax_loss.set_ylabel("train loss (mean over seeds, EMA 0.9)")
    ax_eval.set_ylabel("eval cross-entropy (mean over seeds)")
    ax_eval.set_xlabel("batch")
    # Zoom on the second half, where the schedules differ; the first evaluations are far above.
    tail = [
        statistics.mean(r["evals"][k][1] for r in runs)
        for runs in results.values()
        for k in range(len(runs[0]["evals"]) // 2, len(runs[0]["evals"]))
    ]
    if tail:
        lo, hi = min(tail), max(tail)
        pad = 0.1 * (hi - lo or 1.0)
        ax_eval.set_ylim(lo - pad, hi + pad)
        ax_loss.set_ylim(lo - 4 * pad, hi + 8 * pad)
    for ax in (ax_lr, ax_loss, ax_eval):
        ax.grid(alpha=0.3)
    _common.save_figure(fig, path, dpi=90)


def plot_long(results: dict[str, list[dict[str, Any]]], path: Path, args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_lr, ax_eval, ax_flat) = plt.subplots(3, 1, figsize=(9, 12), sharex=True)
    colors = plt.get_cmap("tab10")
    tail: list[float] = []
    for i, (name, runs) in enumerate(results.items()):
        color = colors(i)
        style = "--" if name.startswith("plateau") else "-"
        lrs = runs[0]["lr"]
        ax_lr.plot(range(1, len(lrs) + 1), lrs, style, color=color, label=name, lw=1.4)
        batches, mean = _mean_curve(runs)
        ax_eval.plot(batches, mean, style, color=color, marker="o", ms=2.5, lw=1.2)
        tail += [v for b, v in zip(batches, mean, strict=True) if b >= args.batches // 3]
    ax_lr.set_yscale("log")
    ax_lr.set_ylabel(f"LR (seed {args.seeds[0]})")
    ax_lr.legend(fontsize=8, ncol=2)
    ax_lr.set_title(
        f"Long scenario: MPT of {next(iter(results.values()))[0]['n_params']:,} params, {args.batches} batches x "
        f"{args.batch_size} seqs, {len(args.seeds)} seeds"
    )
    ax_eval.set_ylabel("eval cross-entropy (mean over seeds)")
    if tail:  # zoom on the last two thirds, where the schedules differ
        lo, hi = min(tail), max(tail)
        pad = 0.05 * (hi - lo or 1.0)
        ax_eval.set_ylim(lo - pad, hi + pad)
    constant = results.get("constant_with_warmup", [])
    values: list[float] = []
    for k, run in enumerate(constant):
        color = plt.get_cmap("Dark2")(k)
        points = [(b, v) for b, v in run["evals"] if b >= args.batches // 3]
        ax_flat.plot(*zip(*points, strict=True), "o-", color=color, ms=3, lw=1, label=f"seed {run['seed']}")
        fit = flatness(run, args.batches)
        xs = [fit["first"], float(args.batches)]
        ax_flat.plot(xs, [fit["intercept"] + fit["slope"] * x for x in xs], "-", color=color, lw=2.5, alpha=0.6)
        values += [v for _, v in points]
    if constant:
        ax_flat.axvline(args.batches - args.batches // 3, color="grey", lw=0.8, ls=":")
        ax_flat.set_ylabel("constant LR: eval CE per seed\n(thick: least-squares line, last third)")
        ax_flat.legend(fontsize=8)
    ax_flat.set_xlabel("batch")
    for ax in (ax_lr, ax_eval, ax_flat):
        ax.grid(alpha=0.3)
    _common.save_figure(fig, path, dpi=90)


# -- main -------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", choices=[*SCENARIOS, "all"], default="short", help="default: short")
    parser.add_argument("--batches", type=int, help="batches per run (default: the scenario's, 300 / 5000)")
    parser.add_argument("--batch-size", type=int, help="sequences per batch (default: the scenario's, 8)")
    parser.add_argument("--eval-interval", type=int, help="batches between evaluations (default: 30 / 125)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[17, 18, 19], help="seeds (default 17 18 19)")
    parser.add_argument("--configs", nargs="+", metavar="CONFIG", help="a subset of the scenario's configs")
    parser.add_argument("--jobs", type=int, default=1, help="runs at a time, each in its own process (default 1)")
    parser.add_argument("--plot", type=Path, help="plot file (default: docs/img/quality.png / quality-long.png)")
    parser.add_argument("--json", type=Path, help="write every curve to this JSON file (STEM-SCENARIO.json for all)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 configs, 1 seed, 6 or 8 batches")
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA, help="demo data folder (made if absent)")
    args = parser.parse_args(argv)
    names = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    if args.scenario == "all" and (args.configs or args.batches or args.eval_interval or args.plot):
        parser.error("--configs, --batches, --eval-interval and --plot apply to one scenario at a time")
    data = _common.ensure_data(args.data)
    print(f"load average at start: {os.getloadavg()[0]:.1f}", file=sys.stderr)
    for name in names:
        scenario = SCENARIOS[name]
        run_args = argparse.Namespace(**vars(args))
        run_args.batches = args.batches or scenario.batches
        run_args.batch_size = args.batch_size or scenario.batch_size
        run_args.eval_interval = args.eval_interval or scenario.eval_interval
        run_args.configs = args.configs or list(scenario.configs)
        unknown = [c for c in run_args.configs if c not in scenario.configs]
        if unknown:
            parser.error(f"--configs: {unknown} not in the {name} scenario; choose from {list(scenario.configs)}")
        if args.quick:
            run_args.seeds, run_args.configs = args.seeds[:1], list(scenario.quick_configs)
            run_args.batches, run_args.eval_interval = scenario.quick_shape
        start = time.perf_counter()
        results = run_all(run_args, scenario, data)
        wall = time.perf_counter() - start
        report = report_short if name == "short" else report_long
        print(f"## Scenario {name}\n\n{report(results, run_args, scenario)}")
        print(f"Wall-clock of the scenario: {wall / 60:.1f} min with --jobs {args.jobs}; load average now "
              f"{os.getloadavg()[0]:.1f}.\n")  # fmt: skip
        path = args.plot or scenario.plot
        (plot_short if name == "short" else plot_long)(results, path, run_args)
        print(f"plot: {path}\n")
        if args.json:
            path = args.json.with_stem(f"{args.json.stem}-{name}") if len(names) > 1 else args.json
            path.write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
