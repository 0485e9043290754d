"""Final eval cross-entropy of the tiny MPT on the demo corpus under eight LR schedules, three seeds each.

Run: ``.venv/bin/python bench/bench_quality.py`` (about 15 minutes on 2 CPU cores; ``--quick`` to smoke).

Model and data: ``yamls/tiny-wsd.yaml`` (MPT, d_model 64, 2 layers, 141k parameters, 128-token sequences) on the
demo corpus (``foundry-ext demo-data``), global batch ``--batch-size`` sequences, ``--batches`` batches, peak LR
3e-3 (AdamW), evaluation on the whole validation split (256 sequences) every ``--eval-interval`` batches. Every
schedule warms up for 20 batches and, where it decays, ends at 0.1 of the peak. The seed
(``variables.global_seed``) sets both the initialisation and the data order; all configs see the same seeds.

Runs are trained one after another in this process through ``train.py``. Output: a Markdown table (mean, sample
standard deviation and range of the final eval cross-entropy over seeds, ranked), and a plot of the LR, the train
loss and the eval cross-entropy of every config (``--plot``, default ``docs/img/quality.png``).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common

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
QUICK_CONFIGS = ("cosine_with_warmup", "plateau (WSD base)")


def run_all(args: argparse.Namespace, data: Path) -> dict[str, list[dict[str, Any]]]:
    import torch

    torch.set_num_threads(1)  # see bench_training.py: faster and steadier on a shared 2-core machine
    results: dict[str, list[dict[str, Any]]] = {name: [] for name in args.configs}
    for seed in args.seeds:  # seed-major: a slow spell of the machine does not hit one config only
        for name in args.configs:
            scheduler = json.loads(json.dumps(CONFIGS[name]))
            if args.quick:
                scheduler["t_warmup"] = "2ba"
                if "base" in scheduler:
                    scheduler["base"]["t_warmup"] = "2ba"
            cfg = _common.make_config(
                data,
                scheduler,
                max_duration=f"{args.batches}ba",
                eval_interval=f"{args.eval_interval}ba",
                eval_subset_num_batches=-1,
                global_train_batch_size=args.batch_size,
                device_train_microbatch_size=args.batch_size,
                **{"variables.global_seed": seed},
            )
            start = time.perf_counter()
            rec = _common.run(cfg)
            seconds = time.perf_counter() - start
            final = rec.evals[-1]
            assert final[0] == args.batches, f"last evaluation at batch {final[0]}, not at the end"
            results[name].append(
                {"seed": seed, "final": final[1], "evals": rec.evals, "lr": rec.lr, "loss": rec.loss, "s": seconds}
            )
            print(f"seed {seed} {name}: final eval CE {final[1]:.4f} ({seconds:.0f} s)", file=sys.stderr, flush=True)
    return results


def report(results: dict[str, list[dict[str, Any]]], args: argparse.Namespace) -> str:
    peak = 3.0e-3
    rows = []
    for name, runs in results.items():
        finals = [r["final"] for r in runs]
        sd = statistics.stdev(finals) if len(finals) > 1 else math.nan
        final_lr = runs[0]["lr"][-1] / peak
        rows.append((statistics.mean(finals), name, sd, min(finals), max(finals), finals, final_lr))
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
        sd_text = "-" if math.isnan(sd) else f"{sd:.4f}"
        lines.append(
            f"| {i} | {name} | {mean:.4f} | {sd_text} | {lo:.4f}-{hi:.4f} | {mean - best:+.4f} | {per_seed} | "
            f"{final_lr:.3f} |"
        )
    total = sum(r["s"] for runs in results.values() for r in runs)
    lines.append("")
    lines.append(f"{sum(len(r) for r in results.values())} runs, {total / 60:.1f} min of training in all.")
    return "\n".join(lines)


def plot(results: dict[str, list[dict[str, Any]]], path: Path, args: argparse.Namespace) -> None:
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
        batches = [b for b, _ in runs[0]["evals"]]
        mean_eval = [statistics.mean(r["evals"][k][1] for r in runs) for k in range(len(batches))]
        ax_eval.plot(batches, mean_eval, style, color=color, marker="o", ms=3, lw=1.2)
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
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=300, help="batches per run (default 300)")
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per batch (default 8)")
    parser.add_argument("--eval-interval", type=int, default=30, help="batches between evaluations (default 30)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[17, 18, 19], help="seeds (default 17 18 19)")
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS), metavar="CONFIG")
    parser.add_argument("--plot", type=Path, default=_common.ROOT / "docs" / "img" / "quality.png")
    parser.add_argument("--json", type=Path, help="also write every curve to this JSON file")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 configs, 1 seed, 6 batches")
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA, help="demo data folder (made if absent)")
    args = parser.parse_args(argv)
    if args.quick:
        args.batches, args.eval_interval, args.seeds, args.configs = 6, 3, args.seeds[:1], list(QUICK_CONFIGS)
    data = _common.ensure_data(args.data)
    results = run_all(args, data)
    print(report(results, args))
    plot(results, args.plot, args)
    print(f"\nplot: {args.plot}")
    if args.json:
        args.json.write_text(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
