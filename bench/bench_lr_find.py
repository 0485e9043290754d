"""Does ``foundry-ext lr-find`` suggest a good LR? A sweep of constant LRs against every rule's suggestion.

Run: ``.venv/bin/python bench/bench_lr_find.py`` (about 30 minutes on 2 CPU cores; ``--quick`` to smoke).

For each model size (``small``: ``yamls/tiny-wsd.yaml``'s MPT, d_model 64, 2 layers; ``medium``: d_model 128,
4 layers; ``large``: d_model 256, 4 layers, only with ``--sizes``), on the demo corpus:

1. the range test (:func:`foundry_ext.lr_find.lr_find`, what ``foundry-ext lr-find`` runs), ``--find-batches``
   batches from 1e-7 to 1.0, once per ``--find-seeds`` seed; every rule's suggestion is computed from each
   recorded curve for every smoothing factor of ``--betas`` (the rules only read the curve, so one run serves all);
2. the config is trained with a constant LR (``scheduler: {name: constant}``, no warmup) for ``--batches`` batches
   at each LR of ``--lrs`` and at each suggestion of the first seed, all with seed 17 (same initialisation, same
   data order); a run's score is its eval cross-entropy on the whole validation split after the last batch.

A suggestion passes if its score is within the sweep's best two LRs' range: at most the second-best sweep score.
Output: per size, the sweep and a table of every (rule, beta) with its suggestion, score and verdict, then the
(rule, beta) pairs that pass at every size; the plot (``--plot``, default ``docs/img/lr-find-bench.png``).
Training runs are deterministic on CPU: ``--cache FILE`` keeps their scores, so a rerun trains only new LRs.
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
BETAS = [0.98, 0.9, 0.8]
CONSTANT = {"name": "constant"}
SEED = 17


def config(data: Path, size: str, batches: int, lr: float, seed: int = SEED) -> Any:
    return _common.make_config(
        data,
        CONSTANT,
        max_duration=f"{batches}ba",
        eval_interval=f"{batches}ba",
        eval_subset_num_batches=-1,
        **{"optimizer.lr": lr, "variables.global_seed": seed, **SIZES[size]},
    )


def final_loss(data: Path, size: str, batches: int, lr: float) -> tuple[float, float]:
    """Train a constant ``lr``; the eval cross-entropy after the last batch (nan if it diverged) and the seconds."""
    start = time.perf_counter()
    rec = _common.run(config(data, size, batches, lr))
    seconds = time.perf_counter() - start
    final = rec.evals[-1] if rec.evals else (None, math.nan)
    assert final[0] in (None, batches), f"last evaluation at batch {final[0]}, not {batches}"
    return float(final[1]), seconds


def range_test(data: Path, size: str, batches: int, find_batches: int, seed: int) -> Any:
    from omegaconf import OmegaConf as om

    from foundry_ext.lr_find import lr_find

    cfg = om.to_container(config(data, size, batches, 1e-3, seed), resolve=True)
    for attempt in range(3):
        try:
            return lr_find(cfg, lr_min=1e-7, lr_max=1.0, batches=find_batches, progress=False)
        except FileExistsError as err:  # StreamingDataset's /dev/shm name race with another job: see _common.run
            if attempt == 2:
                raise
            print(f"bench: retrying a range test after a shared-memory name clash ({err})", file=sys.stderr)
    raise AssertionError("unreachable")


Key = tuple[str, str, float]  # (rule, reading, beta)


def suggestions(found: Any, betas: list[float], batches: int) -> dict[Key, float | None]:
    """(rule, reading, beta) -> suggested LR: every rule, in both readings, on the curve smoothed with each beta."""
    from foundry_ext.lr_find import RULES, smooth, suggest_all
    from foundry_ext.lr_find.rules import smooth_lr

    out: dict[Key, float | None] = {}
    for rule in RULES:
        for reading in ("lag-matched", "batch-lr"):
            for beta in betas:
                xs = smooth_lr(found.lrs, beta) if reading == "lag-matched" else found.lrs
                out[(rule, reading, beta)] = suggest_all(xs, smooth(found.losses, beta), batches)[rule].lr
    return out


class Cache:
    """Scores of finished training runs, by (size, lr, batches): the runs are deterministic."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.data: dict[str, float] = json.loads(path.read_text()) if path and path.exists() else {}

    def get(self, size: str, lr: float, batches: int) -> float | None:
        return self.data.get(f"{size}|{lr!r}|{batches}")

    def put(self, size: str, lr: float, batches: int, loss: float) -> None:
        self.data[f"{size}|{lr!r}|{batches}"] = loss
        if self.path:
            self.path.write_text(json.dumps(self.data, indent=1))


def run_size(args: argparse.Namespace, data: Path, size: str, cache: Cache) -> dict[str, Any]:
    from foundry_ext.lr_find import DEFAULT_BETA, DEFAULT_RULE
    from foundry_ext.lr_find.runner import READINGS

    found, by_seed = None, {}
    for seed in args.find_seeds:
        result = range_test(data, size, args.batches, args.find_batches, seed)
        found = found or result
        by_seed[seed] = suggestions(result, args.betas, args.find_batches)
        print(f"{size}: range test seed {seed}: {result.batches_run} batches in {result.seconds:.0f} s",
              file=sys.stderr, flush=True)  # fmt: skip
    first = by_seed[args.find_seeds[0]]
    default = (DEFAULT_RULE, READINGS[0], DEFAULT_BETA)
    every_seed = [by_seed[s][default] for s in args.find_seeds]  # the tool's answer is also trained for each seed
    to_train = [*args.lrs, *(lr for lr in [*first.values(), *every_seed] if lr is not None)]
    losses: dict[float, float] = {}
    seconds, trained = 0.0, 0
    for lr in to_train:
        if lr in losses:
            continue
        cached = cache.get(size, lr, args.batches)
        if cached is not None:
            losses[lr] = cached
            continue
        losses[lr], s = final_loss(data, size, args.batches, lr)
        cache.put(size, lr, args.batches, losses[lr])
        seconds, trained = seconds + s, trained + 1
        print(f"{size}: lr {lr:.3g}: final eval CE {losses[lr]:.4f} ({s:.0f} s)", file=sys.stderr, flush=True)
    assert found is not None
    return {
        "size": size,
        "default": default,
        "by_seed": by_seed,
        "find_seconds": found.seconds,
        "find_batches_run": found.batches_run,
        "stopped_early": found.stopped_early,
        "sweep": {lr: losses[lr] for lr in args.lrs},
        "losses": losses,
        "train_seconds": seconds,
        "trained": trained,
        "curve": {"lrs": found.lrs, "losses": found.losses},
    }


def _score(value: float) -> float:
    return value if math.isfinite(value) else math.inf


def _threshold(res: dict[str, Any]) -> tuple[tuple[float, float], tuple[float, float]]:
    ranked = sorted(res["sweep"].items(), key=lambda kv: _score(kv[1]))
    return ranked[0], ranked[1]


def passes(res: dict[str, Any], lr: float | None) -> bool:
    if lr is None:
        return False
    (_, _), (_, second) = _threshold(res)
    return _score(res["losses"][lr]) <= second


def report(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    seeds = args.find_seeds
    lines = [
        f"Constant LR, no warmup, {args.batches} batches of 16 x 128 tokens, seed {SEED} for every training run; "
        f"score = eval cross-entropy (nats/token) on the whole validation split after the last batch. Range test: "
        f"{args.find_batches} batches, lr 1e-7 -> 1.0, seeds {', '.join(map(str, seeds))}: the first seed's "
        f"suggestions are trained, the others show how far a suggestion moves with the seed.",
    ]
    for res in results:
        (best_lr, best), (second_lr, second) = _threshold(res)
        lines += [
            "",
            f"**{res['size']}** ({', '.join(f'{k} {v}' for k, v in SIZES[res['size']].items())}): range test "
            f"{res['find_batches_run']} batches{' (stopped early)' if res['stopped_early'] else ''} in "
            f"{res['find_seconds']:.0f} s; {res['trained']} training runs here ({res['train_seconds'] / 60:.1f} min), "
            f"{len(res['losses']) - res['trained']} from the cache.",
            "",
            "| sweep LR | " + " | ".join(f"{lr:g}" for lr in res["sweep"]) + " |",
            "|---|" + "---:|" * len(res["sweep"]),
            "| final eval CE | "
            + " | ".join(f"{v:.4f}" if math.isfinite(v) else "diverged" for v in res["sweep"].values())
            + " |",
            "",
            f"Best {best_lr:g} ({best:.4f}), second {second_lr:g} ({second:.4f}): a suggestion passes if its score is "
            f"<= {second:.4f}.",
        ]
    head = " | ".join(f"{r['size']}: LR (seed {seeds[0]}) | CE | pass" for r in results)
    lines += [
        "",
        f"Every rule, reading and smoothing factor (bold: the tool's default); LRs of seeds "
        f"{', '.join(map(str, seeds[1:]))} in brackets:"
        if seeds[1:]
        else "Every rule, reading and beta:",
        "",
        f"| rule | reading | beta | {head} | passes at every size |",
        "|---|---|---:|" + "---:|---:|---|" * len(results) + "---|",
    ]
    keys = list(results[0]["by_seed"][seeds[0]])
    for key in keys:
        rule, reading, beta = key
        cells = []
        for res in results:
            lr = res["by_seed"][seeds[0]][key]
            others = [res["by_seed"][s][key] for s in seeds[1:]]
            other_text = " (" + ", ".join("-" if o is None else f"{o:.2g}" for o in others) + ")" if others else ""
            if lr is None:
                cells.append(f"-{other_text} | - | no")
                continue
            loss = res["losses"][lr]
            loss_text = f"{loss:.4f}" if math.isfinite(loss) else "diverged"
            cells.append(f"{lr:.3g}{other_text} | {loss_text} | {'yes' if passes(res, lr) else 'no'}")
        everywhere = all(passes(r, r["by_seed"][seeds[0]][key]) for r in results)
        label = f"**{rule}**" if key == tuple(results[0]["default"]) else rule
        lines.append(f"| {label} | {reading} | {beta:g} | {' | '.join(cells)} | {'**yes**' if everywhere else 'no'} |")
    rule, reading, beta = results[0]["default"]
    lines += ["", f"The tool's default ({rule}, {reading}, beta {beta:g}) at every range-test seed, trained:", ""]
    for res in results:
        runs = []
        for seed in seeds:
            lr = res["by_seed"][seed][tuple(res["default"])]
            if lr is None:
                runs.append(f"seed {seed}: no suggestion")
                continue
            loss = res["losses"][lr]
            runs.append(f"seed {seed}: {lr:.3g} -> {loss:.4f} ({'passes' if passes(res, lr) else 'misses'})")
        lines.append(f"- {res['size']}: " + "; ".join(runs))
    return "\n".join(lines)


def plot(results: list[dict[str, Any]], path: Path, args: argparse.Namespace) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from foundry_ext.lr_find import smooth
    from foundry_ext.lr_find.rules import smooth_lr

    fig, axes = plt.subplots(len(results), 2, figsize=(12, 4.2 * len(results)), squeeze=False)
    colors = {"valley": "tab:red", "minimum": "tab:orange", "steepest": "tab:green", "steepest_linear": "tab:gray"}
    for row, res in zip(axes, results, strict=True):
        ax_find, ax_sweep = row
        rule, reading, beta = res["default"]
        curve = res["curve"]
        ax_find.plot(curve["lrs"], curve["losses"], color="tab:blue", alpha=0.35, lw=1, label="train loss (raw)")
        xs_read = smooth_lr(curve["lrs"], beta) if reading == "lag-matched" else curve["lrs"]
        ax_find.plot(xs_read, smooth(curve["losses"], beta), color="tab:blue", lw=1.8,
                     label=f"smoothed, beta {beta:g}, {reading} (the tool's)")  # fmt: skip
        ax_find.plot(curve["lrs"], smooth(curve["losses"], 0.98), color="tab:gray", ls="--", lw=1.4,
                     label="smoothed, beta 0.98, batch-lr (fastai's, Lightning's)")  # fmt: skip
        ax_find.set_title(f"{res['size']}: range test ({res['find_batches_run']} batches)", fontsize=10)
        sweep = sorted(res["sweep"].items())
        xs = [lr for lr, v in sweep if math.isfinite(v)]
        ys = [v for _, v in sweep if math.isfinite(v)]
        ax_sweep.plot(xs, ys, "o-", color="black", label="constant-LR sweep")
        ax_sweep.set_title(f"{res['size']}: final eval CE of {args.batches}-batch constant-LR runs", fontsize=10)
        first = res["by_seed"][args.find_seeds[0]]
        for name, lr in ((k[0], v) for k, v in first.items() if k[1:] == (reading, beta)):
            if lr is None:
                continue
            style = "-" if name == rule else ":"
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
    rule, reading, beta = results[0]["default"]
    fig.suptitle(f"Every rule's suggestion in the tool's default reading ({reading}, beta {beta:g})", fontsize=11)
    _common.save_figure(fig, path, dpi=80)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=200, help="batches of each constant-LR run (default 200)")
    parser.add_argument("--find-batches", type=int, default=100, help="batches of the range test (default 100)")
    parser.add_argument("--find-seeds", type=int, nargs="+", default=[17, 18, 19], help="range-test seeds")
    parser.add_argument("--lrs", type=float, nargs="+", default=SWEEP, help="the sweep's LRs")
    parser.add_argument("--betas", type=float, nargs="+", default=BETAS, help="smoothing factors to read rules at")
    parser.add_argument("--sizes", nargs="+", default=["small", "medium"], choices=list(SIZES))
    parser.add_argument("--plot", type=Path, default=_common.ROOT / "docs" / "img" / "lr-find-bench.png")
    parser.add_argument("--json", type=Path, help="also write every result to this JSON file")
    parser.add_argument("--cache", type=Path, help="JSON file of finished runs' scores, read and extended")
    parser.add_argument("--quick", action="store_true", help="smoke run: small model, 3 LRs, 12-batch runs, 1 seed")
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA, help="demo data folder (made if absent)")
    args = parser.parse_args(argv)
    if args.quick:
        args.batches, args.find_batches, args.lrs, args.sizes = 12, 12, [1e-3, 1e-2, 1e-1], ["small"]
        args.find_seeds, args.betas = args.find_seeds[:1], []
    from foundry_ext.lr_find import DEFAULT_BETA

    if DEFAULT_BETA not in args.betas:
        args.betas = [DEFAULT_BETA, *args.betas]
    import torch

    torch.set_num_threads(1)  # as the other training benchmarks: faster and steadier on a shared 2-core machine
    data = _common.ensure_data(args.data)
    info = _common.machine_info()
    cache = Cache(args.cache)
    start = time.perf_counter()
    results = [run_size(args, data, size, cache) for size in args.sizes]
    print(_common.header(info, "python bench/bench_lr_find.py " + " ".join(argv or sys.argv[1:])))
    print()
    print(report(results, args))
    print(f"\n{(time.perf_counter() - start) / 60:.1f} min in all.")
    plot(results, args.plot, args)
    print(f"plot: {args.plot}")
    if args.json:
        for res in results:  # JSON keys must be strings: (rule, reading, beta) -> "rule|reading|beta"
            res["by_seed"] = {s: {"|".join(map(str, k)): v for k, v in d.items()} for s, d in res["by_seed"].items()}
        args.json.write_text(json.dumps(results, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
