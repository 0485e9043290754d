"""Batch-size warmup against a fixed batch at equal tokens (issue 43's evidence): final eval loss, steps, wall time.

Run: ``.venv/bin/python bench/bench_batch_ramp.py`` (15 runs, 2 min on this machine when quiet);
``--quick`` is the suite's smoke size (tests/bench/test_bench_smoke.py).

The tiny MPT of ``yamls/tiny-batch-ramp.yaml`` (d_model 64, 2 layers) on the demo data, every run the same number of
tokens (``--tokens``, default 262,144 = 2,048 samples of 128 tokens, half an epoch) with the same schedule in tokens
(``warmup_stable_decay``: warmup over the first 1/16 of the tokens, linear decay over the last 20 % to 10 %):

* ``fixed 32``: global batch 32 throughout, LR ``--lr``;
* ``fixed 8``: global batch 8 throughout, LR ``--lr``: the ramp's first batch kept, the baseline the literature's
  step savings are counted against;
* ``ramp 8-16-32, none``: 8 samples, 16 from 1/16 of the tokens, 32 from 3/16, LR ``--lr`` at every stage;
* ``ramp 8-16-32, sqrt``: the same ramp, ``lr_scaling: sqrt`` from ``--lr / 2``: the LR reaches ``--lr`` at 32;
* ``late ramp 8-16-32, none``: 8 samples for the first half of the tokens, 16 from 1/2, 32 from 3/4, LR ``--lr``.

Per seed (the seed sets the initialisation and the data order), each run trains in this process through
``train.py`` and reports its final eval loss on the whole validation split, its optimizer steps, its wall time and its
CPU time (``Trainer.fit``; the CPU time is the process's, every thread's). The runs of one seed follow each other, so
a change in the machine's load falls on every kind of run alike. Reported: every seed's loss, the mean and the spread
(max - min) over the seeds, the mean wall and CPU time of a fit.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import _common

RAMP_YAML = _common.ROOT / "yamls" / "tiny-batch-ramp.yaml"


def configs(tokens: int, lr: float) -> dict[str, dict[str, Any]]:
    """The runs compared: name -> overrides of yamls/tiny-batch-ramp.yaml."""
    first, second = tokens // 16, 3 * tokens // 16
    ramp = [{"at": f"{first}tok", "global_train_batch_size": 16}, {"at": f"{second}tok", "global_train_batch_size": 32}]
    late = [{"at": f"{tokens // 2}tok", "global_train_batch_size": 16},
            {"at": f"{3 * tokens // 4}tok", "global_train_batch_size": 32}]  # fmt: skip
    return {
        "fixed 32": {"global_train_batch_size": 32, "batch_size_schedule": None, "optimizer.lr": lr},
        "fixed 8": {"global_train_batch_size": 8, "batch_size_schedule": None, "optimizer.lr": lr},
        "ramp 8-16-32, none": {"batch_size_schedule": {"stages": ramp, "lr_scaling": "none"}, "optimizer.lr": lr},
        "ramp 8-16-32, sqrt": {"batch_size_schedule": {"stages": ramp, "lr_scaling": "sqrt"}, "optimizer.lr": lr / 2},
        "late ramp 8-16-32, none": {"batch_size_schedule": {"stages": late, "lr_scaling": "none"}, "optimizer.lr": lr},
    }


def make_config(data: Path, tokens: int, seed: int, overrides: dict[str, Any]) -> Any:
    from omegaconf import OmegaConf as om

    cfg = om.load(RAMP_YAML)
    cfg.variables.data_local = str(data)
    cfg.variables.global_seed = seed
    for key in ("save_folder", "save_interval", "save_overwrite"):
        cfg.pop(key, None)
    cfg.callbacks = {"bench_recorder": {}}
    cfg.log_to_console = False
    cfg.python_log_level = "warn"
    cfg.max_duration = f"{tokens}tok"
    cfg.eval_interval = f"{tokens}tok"  # once, at the end
    cfg.eval_subset_num_batches = -1  # the whole validation split
    cfg.scheduler = {
        "name": "warmup_stable_decay",
        "t_warmup": f"{tokens // 16}tok",
        "t_decay": "0.2dur",
        "decay_type": "linear",
        "alpha_f": 0.1,
    }
    for key, value in overrides.items():
        if value is None:
            cfg.pop(key, None)
        else:
            om.update(cfg, key, value, merge=False)
    return cfg


def bench(data: Path, tokens: int, seeds: list[int], lr: float) -> dict[str, list[dict[str, float]]]:
    results: dict[str, list[dict[str, float]]] = {}
    for seed in seeds:
        for name, overrides in configs(tokens, lr).items():
            rec = _common.run(make_config(data, tokens, seed, overrides))
            results.setdefault(name, []).append(
                {
                    "seed": seed,
                    "loss": rec.evals[-1][1],
                    "steps": len(rec.batch_end),
                    "seconds": rec.fit_end - rec.fit_start,
                    "cpu": rec.fit_cpu,
                    "mean_lr": statistics.fmean(rec.lr),
                }
            )
            print(
                f"  {name}, seed {seed}: eval {rec.evals[-1][1]:.4f}, {len(rec.batch_end)} steps, "
                f"{rec.fit_end - rec.fit_start:.1f} s, {rec.fit_cpu:.1f} CPU-s",
                file=sys.stderr,
            )
    return results


def report(results: dict[str, list[dict[str, float]]], tokens: int, seeds: list[int]) -> str:
    lines = [
        f"{tokens:,} tokens per run, seeds {', '.join(map(str, seeds))}; final eval loss on the whole validation split",
        "",
        "| run | optimizer steps | mean LR of a step | final eval loss per seed | mean | spread (max - min) | fit wall "
        "time (mean) | fit CPU time (mean) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, rows in results.items():
        losses = [r["loss"] for r in rows]
        steps = sorted({int(r["steps"]) for r in rows})
        lines.append(
            f"| {name} | {', '.join(map(str, steps))} | {statistics.fmean(r['mean_lr'] for r in rows):.3g} | "
            f"{', '.join(f'{x:.4f}' for x in losses)} | "
            f"{statistics.fmean(losses):.4f} | {max(losses) - min(losses):.4f} | "
            f"{statistics.fmean(r['seconds'] for r in rows):.1f} s | {statistics.fmean(r['cpu'] for r in rows):.1f} s |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=262_144, help="tokens per run (default 262144)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[17, 18, 19], help="seeds (default 17 18 19)")
    parser.add_argument("--lr", type=float, default=3.0e-3, help="the peak LR at batch 32 (default 3e-3)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 16,384 tokens, one seed")
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA, help="demo data folder (made if absent)")
    args = parser.parse_args(argv)
    if args.quick:
        args.tokens, args.seeds = 16_384, args.seeds[:1]
    data = _common.ensure_data(args.data)
    start = time.perf_counter()
    results = bench(data, args.tokens, args.seeds, args.lr)
    print(_common.header(_common.machine_info(), " ".join(["bench/bench_batch_ramp.py", *(argv or sys.argv[1:])])))
    print()
    print(report(results, args.tokens, args.seeds))
    print(f"\n(wall-clock {time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
