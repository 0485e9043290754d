"""Does ``foundry-ext lr-find`` suggest a good LR? A sweep of constant LRs against each rule's suggestion.

Run: ``.venv/bin/python bench/bench_lr_find.py`` (about 20 minutes on 2 CPU cores; ``--quick`` to smoke).

For each model size (``small``: ``yamls/tiny-wsd.yaml``'s MPT, d_model 64, 2 layers; ``medium``: d_model 128,
4 layers; ``large``: d_model 256, 4 layers, only with ``--sizes``), on the demo corpus:

1. the range test (:func:`foundry_ext.lr_find.lr_find`, what the command runs) on the config, ``--find-batches``
   batches from 1e-7 to 1.0, gives every rule's suggestion;
2. the config is trained with a constant LR (``scheduler: {name: constant}``, no warmup) for ``--batches`` batches
   at each LR of ``--lrs``, and at each rule's suggestion, all with the same seed (same initialisation, same data
   order); each run's eval cross-entropy on the whole validation split after the last batch is its score.

Output: per size, a Markdown table of every run, then which suggestions land within the sweep's best two LRs' loss
range (loss <= the second-best sweep loss) and the plot (``--plot``, default ``docs/img/lr-find-bench.png``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common

SIZES: dict[str, dict[str, Any]] = {
    "small": {"model.d_model": 64, "model.n_layers": 2},
    "medium": {"model.d_model": 128, "model.n_layers": 4},
    "large": {"model.d_model": 256, "model.n_layers": 4},
}
SWEEP = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1]
CONSTANT = {"name": "constant"}


def config(data: Path, size: str, batches: int, lr: float) -> Any:
    return _common.make_config(
        data,
        CONSTANT,
        max_duration=f"{batches}ba",
        eval_interval=f"{batches}ba",
        eval_subset_num_batches=-1,
        **{"optimizer.lr": lr, **SIZES[size]},
    )


def final_loss(data: Path, size: str, batches: int, lr: float) -> tuple[float, float]:
    """Train a constant ``lr``; the eval cross-entropy after the last batch (nan if it diverged) and the seconds."""
    start = time.perf_counter()
    rec = _common.run(config(data, size, batches, lr))
    seconds = time.perf_counter() - start
    final = rec.evals[-1] if rec.evals else (None, math.nan)
    assert final[0] in (None, batches), f"last evaluation at batch {final[0]}, not {batches}"
    return float(final[1]), seconds


def range_test(data: Path, size: str, batches: int, find_batches: int) -> Any:
    from omegaconf import OmegaConf as om

    from foundry_ext.lr_find import lr_find

    cfg = om.to_container(config(data, size, batches, 1e-3), resolve=True)
    return lr_find(cfg, lr_min=1e-7, lr_max=1.0, batches=find_batches, progress=False)


def run_size(args: argparse.Namespace, data: Path, size: str) -> dict[str, Any]:
    found = range_test(data, size, args.batches, args.find_batches)
    suggestions = {name: r.lr for name, r in found.suggestions.items()}
    print(
        f"{size}: range test {found.batches_run} batches in {found.seconds:.0f} s; "
        + ", ".join(f"{k} {v:.3g}" if v else f"{k} -" for k, v in suggestions.items()),
        file=sys.stderr,
        flush=True,
    )
    losses: dict[float, float] = {}
    seconds = 0.0
    for lr in [*args.lrs, *(v for v in suggestions.values() if v is not None)]:
        if lr in losses:
            continue
        losses[lr], s = final_loss(data, size, args.batches, lr)
        seconds += s
        print(f"{size}: lr {lr:.3g}: final eval CE {losses[lr]:.4f} ({s:.0f} s)", file=sys.stderr, flush=True)
    return {
        "size": size,
        "suggestions": suggestions,
        "rule": found.rule,
        "find_seconds": found.seconds,
        "find_batches_run": found.batches_run,
        "stopped_early": found.stopped_early,
        "sweep": {lr: losses[lr] for lr in args.lrs},
        "losses": losses,
        "train_seconds": seconds,
        "curve": {"lrs": found.lrs, "losses": found.losses, "smoothed": found.smoothed},
    }


def _ok(value: float) -> float:
    return value if math.isfinite(value) else math.inf


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [
        f"Constant LR, no warmup, {args.batches} batches of 16 x 128 tokens, seed 17 for every run; score = eval "
        f"cross-entropy (nats/token) on the whole validation split after the last batch. Range test: "
        f"{args.find_batches} batches, lr 1e-7 -> 1.0, EMA beta 0.98.",
    ]
    for res in results:
        sweep = sorted(res["sweep"].items(), key=lambda kv: _ok(kv[1]))
        (best_lr, best), (second_lr, second) = sweep[0], sweep[1]
        by_lr: dict[float, list[str]] = {}
        for name, lr in res["suggestions"].items():
            if lr is not None:
                by_lr.setdefault(lr, []).append(name)
        lines += [
            "",
            f"**{res['size']}** ({', '.join(f'{k} {v}' for k, v in SIZES[res['size']].items())}): range test "
            f"{res['find_batches_run']} batches{' (stopped early)' if res['stopped_early'] else ''}, "
            f"{res['find_seconds']:.0f} s; {len(res['losses'])} training runs, {res['train_seconds'] / 60:.1f} min.",
            "",
            "| LR | from | final eval CE | vs sweep best |",
            "|---:|---|---:|---:|",
        ]
        for lr, loss in sorted(res["losses"].items()):
            source = ", ".join(f"**{n}**" if n == res["rule"] else n for n in by_lr.get(lr, []))
            if lr in res["sweep"]:
                source = ("sweep" + (f", {source}" if source else "")) if source else "sweep"
            loss_text = f"{loss:.4f}" if math.isfinite(loss) else "diverged"
            delta = f"{loss - best:+.4f}" if math.isfinite(loss) else "-"
            lines.append(f"| {lr:.3g} | {source} | {loss_text} | {delta} |")
        lines += [
            "",
            f"Sweep best: {best_lr:.3g} ({best:.4f}), second: {second_lr:.3g} ({second:.4f}); a suggestion passes if "
            f"its loss is <= {second:.4f}.",
            "",
            "| rule | suggested LR | final eval CE | within the best two |",
            "|---|---:|---:|---|",
        ]
        for name, lr in res["suggestions"].items():
            if lr is None:
                lines.append(f"| {name} | - | - | no suggestion |")
                continue
            loss = res["losses"][lr]
            ok = math.isfinite(loss) and loss <= second
            label = f"**{name}** (used)" if name == res["rule"] else name
            loss_text = f"{loss:.4f}" if math.isfinite(loss) else "diverged"
            lines.append(f"| {label} | {lr:.3g} | {loss_text} | {'yes' if ok else 'no'} |")
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 2, figsize=(12, 4.2 * len(results)), squeeze=False)
    colors = {"valley": "tab:red", "minimum": "tab:orange", "steepest": "tab:green", "steepest_linear": "tab:gray"}
    for row, res in zip(axes, results, strict=True):
        ax_find, ax_sweep = row
        curve = res["curve"]
        ax_find.plot(curve["lrs"], curve["losses"], color="tab:blue", alpha=0.35, lw=1, label="train loss (raw)")
        ax_find.plot(curve["lrs"], curve["smoothed"], color="tab:blue", lw=2, label="smoothed (beta 0.98)")
        ax_find.set_title(f"{res['size']}: range test ({res['find_batches_run']} batches)", fontsize=10)
        sweep = sorted(res["sweep"].items())
        xs = [lr for lr, v in sweep if math.isfinite(v)]
        ys = [v for _, v in sweep if math.isfinite(v)]
        ax_sweep.plot(xs, ys, "o-", color="black", label="constant-LR sweep")
        ax_sweep.set_title(f"{res['size']}: final eval CE after the sweep's runs", fontsize=10)
        for name, lr in res["suggestions"].items():
            if lr is None:
                continue
            style = "-" if name == res["rule"] else ":"
            for ax in (ax_find, ax_sweep):
                ax.axvline(lr, color=colors.get(name, "tab:purple"), ls=style, lw=1.6, label=f"{name} {lr:.2g}")
            loss = res["losses"][lr]
            if math.isfinite(loss):
                ax_sweep.plot(lr, loss, "*", color=colors.get(name, "tab:purple"), ms=13, zorder=5)
        for ax in row:
            ax.set_xscale("log")
            ax.set_xlabel("learning rate")
            ax.grid(True, which="both", alpha=0.25)
            ax.legend(fontsize=7)
        if ys:
            lo, hi = min(ys), sorted(ys)[min(len(ys) - 1, 5)]
            ax_sweep.set_ylim(lo - 0.05 * (hi - lo or 1), hi + 0.1 * (hi - lo or 1))
        ax_find.set_ylabel("train loss")
        ax_sweep.set_ylabel("eval cross-entropy")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=200, help="batches of each constant-LR run (default 200)")
    parser.add_argument("--find-batches", type=int, default=100, help="batches of the range test (default 100)")
    parser.add_argument("--lrs", type=float, nargs="+", default=SWEEP, help="the sweep's LRs")
    parser.add_argument("--sizes", nargs="+", default=["small", "medium"], choices=list(SIZES))
    parser.add_argument("--plot", type=Path, default=_common.ROOT / "docs" / "img" / "lr-find-bench.png")
    parser.add_argument("--json", type=Path, help="also write every result to this JSON file")
    parser.add_argument("--quick", action="store_true", help="smoke run: small model, 3 LRs, 12-batch runs")
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA, help="demo data folder (made if absent)")
    args = parser.parse_args(argv)
    if args.quick:
        args.batches, args.find_batches, args.lrs, args.sizes = 12, 12, [1e-3, 1e-2, 1e-1], ["small"]
    import torch

    torch.set_num_threads(1)  # as the other training benchmarks: faster and steadier on a shared 2-core machine
    data = _common.ensure_data(args.data)
    info = _common.machine_info()
    start = time.perf_counter()
    results = [run_size(args, data, size) for size in args.sizes]
    print(_common.header(info, "python bench/bench_lr_find.py " + " ".join(argv or sys.argv[1:])))
    print()
    print(report(results, args))
    print(f"\n{(time.perf_counter() - start) / 60:.1f} min in all.")
    plot(results, args.plot)
    print(f"plot: {args.plot}")
    if args.json:
        args.json.write_text(json.dumps(results, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
