"""The LR of every batch of a long run, batch by batch vs on whole arrays: ``python bench/bench_lr_pipeline.py``.

For each schedule, a 1,000,000-batch train YAML (``--batches``) goes through
:class:`foundry_ext.preview.pipeline.LRPipeline` once; then the LR of every batch is computed twice and timed: the old
way, ``LRPipeline.lr_of(b)`` for each batch in a Python loop (what ``plot``'s law curve and ``law predict`` did), and
the new, ``LRPipeline.lrs()`` (each schedule's ``multipliers`` on whole numpy arrays). The two results must be bitwise
equal, or the benchmark fails. Imports and the YAML's loading are outside the timings. Best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

CONFIG = """\
max_seq_len: 2048
global_train_batch_size: 256
max_duration: {batches}ba
optimizer: {{name: decoupled_adamw, lr: 6.0e-4}}
scheduler: {scheduler}
"""
SCHEDULES = {
    "warmup_stable_decay (sqrt)": "{name: warmup_stable_decay, t_warmup: 0.01dur, t_decay: 0.2dur, decay_type: sqrt}",
    "warmup_stable_decay (cosine)": "{name: warmup_stable_decay, t_warmup: 0.01dur, decay_type: cosine}",
    "wsd_periods (3 periods)": (
        "{name: wsd_periods, periods: [0.3dur, 0.3dur, 0.4dur], decay_fraction: 0.1, t_warmup: 0.01dur}"
    ),
    "stages (3 + override)": (
        "{name: stages, stages: [{duration: 0.01dur, start: 0, end: 1}, {duration: 0.5dur, shape: cosine, end: 0.3}, "
        "{duration: 0.49dur, end: 0.1}], override_decay: {start: 0.8dur, duration: 0.2dur, end: 0}}"
    ),
    "power": "{name: power, t_warmup: 0.01dur}",
    "inverse_sqrt": "{name: inverse_sqrt, t_warmup: 0.01dur}",
    "reduce_lr_on_plateau (base: WSD)": (
        "{name: reduce_lr_on_plateau, t_warmup: 0.01dur, base: {name: warmup_stable_decay, t_warmup: 0.01dur}}"
    ),
}


def bench(batches: int, repeat: int) -> dict[str, tuple[float, float]]:
    """``{label: (seconds batch by batch, seconds on arrays)}``, best of ``repeat``; checks the values are equal."""
    import numpy as np

    from foundry_ext.preview.pipeline import LRPipeline

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, scheduler in SCHEDULES.items():
            config = Path(tmp, "cfg.yaml")
            config.write_text(CONFIG.format(batches=batches, scheduler=scheduler))
            pipeline = LRPipeline.from_yaml(str(config))
            old = new = float("inf")
            for _ in range(repeat):
                start = time.perf_counter()
                slow = np.fromiter(map(pipeline.lr_of, range(batches)), dtype=np.float64, count=batches)
                old = min(old, time.perf_counter() - start)
                start = time.perf_counter()
                fast = pipeline.lrs()
                new = min(new, time.perf_counter() - start)
                if not np.array_equal(slow.view(np.int64), fast.view(np.int64)):
                    raise SystemExit(f"{label}: the LRs on arrays differ from the per-batch ones")
            results[label] = (old, new)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    print(f"the LR of each of {args.batches:,} batches, best of {args.repeat} (bitwise equal both ways)")
    print("\n| schedule | batch by batch (s) | on arrays (s) | speed-up |\n|---|---:|---:|---:|")
    for label, (old, new) in bench(args.batches, args.repeat).items():
        print(f"| {label} | {old:.2f} | {new:.3f} | {old / new:.0f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
