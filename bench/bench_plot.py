"""Time ``foundry-ext plot`` on long schedules: ``python bench/bench_plot.py [--batches 1000000]`` (target < 3 s).

Writes an MPT-125M-like config (256 x 2048-token batches, LR 6e-4) to a temporary folder, once per schedule:
WSD (500-batch warmup, 20% 1-sqrt decay), torch's CosineAnnealingLR through ``torch_lr_scheduler`` (the slowest
to sample: torch steps between sampled batches), and ``reduce_lr_on_plateau`` on a WSD base with ``--metrics`` (one
evaluation every 1,000 batches, a plateau that cuts), and runs the plot subcommand in this process, after the
imports (torch, Composer and llm-foundry take seconds to import and are the same for every command). Prints the
wall time of each command and the part spent evaluating the scheduler.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import re
import sys
import tempfile
import time
from pathlib import Path

CONFIG = """\
variables:
  max_seq_len: 2048
max_seq_len: ${{variables.max_seq_len}}
global_train_batch_size: 256
device_train_microbatch_size: 16
max_duration: {batches}ba
optimizer: {{name: decoupled_adamw, lr: 6.0e-4}}
scheduler: {scheduler}
"""
SCHEDULES = {
    "warmup_stable_decay": "{name: warmup_stable_decay, t_warmup: 500ba, t_decay: 0.2dur, decay_type: sqrt}",
    "torch_lr_scheduler CosineAnnealingLR": "{name: torch_lr_scheduler, type: CosineAnnealingLR, T_max: BATCHES}",
    "reduce_lr_on_plateau + --metrics": (
        "{name: reduce_lr_on_plateau, patience: 2, base: {name: warmup_stable_decay, t_warmup: 500ba}}"
    ),
}


def _metrics_csv(path: Path, batches: int) -> None:
    """An eval loss every 1,000 batches that falls, then flattens at 40% of the run: the plateau rule cuts."""
    rows = ["batch,value"]
    for b in range(1000, batches + 1, 1000):
        rows.append(f"{b},{3.0 - 1.5 * min(b / batches, 0.4):.6f}")
    path.write_text("\n".join(rows) + "\n")


def bench(batches: int, repeat: int = 3) -> dict[str, dict[str, float]]:
    """Run ``foundry-ext plot`` ``repeat`` times per schedule on a ``batches``-long run; return the best timings."""
    import llmfoundry.utils.builders  # noqa: F401
    import matplotlib.pyplot  # noqa: F401

    import foundry_ext.cli.plot  # noqa: F401 - imports outside the timing
    from foundry_ext.cli import main

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp, "metrics.csv")
        _metrics_csv(metrics, batches)
        for label, scheduler in SCHEDULES.items():
            config = Path(tmp, "cfg.yaml")
            config.write_text(CONFIG.format(batches=batches, scheduler=scheduler.replace("BATCHES", str(batches))))
            argv = ["plot", str(config), "--out", str(Path(tmp, "lr.png"))]
            if "metrics" in label:
                argv += ["--metrics", str(metrics)]
            best = {"total_s": float("inf"), "evaluate_s": float("inf")}
            for _ in range(repeat):
                out = io.StringIO()
                start = time.perf_counter()
                with contextlib.redirect_stdout(out):
                    rc = main(argv)
                total = time.perf_counter() - start
                if rc != 0:
                    raise SystemExit(f"plot failed (exit {rc}):\n{out.getvalue()}")
                evaluated = re.search(r"batches evaluated in ([0-9.]+)s", out.getvalue())
                best["total_s"] = min(best["total_s"], total)
                best["evaluate_s"] = min(best["evaluate_s"], float(evaluated.group(1)) if evaluated else math.nan)
            results[label] = best
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"foundry-ext plot of a {args.batches:,}-batch schedule, best of {args.repeat}, imports excluded (< 3 s)")
    print("\n| schedule | seconds per command | of which evaluating the scheduler | met |\n|---|---:|---:|---|")
    for label, result in bench(args.batches, args.repeat).items():
        met = "yes" if result["total_s"] < 3.0 else "**no**"
        print(f"| {label} | {result['total_s']:.2f} | {result['evaluate_s']:.2f} | {met} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
