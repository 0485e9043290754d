"""Time ``foundry-ext plot`` on a long WSD schedule: ``python bench/bench_plot.py [--batches 1000000]``.

Writes a WSD config (MPT-125M-like: 500-batch warmup, 20% 1-sqrt decay) to a temporary folder and runs the plot
subcommand in this process, after the imports (torch, Composer and llm-foundry take seconds to import and are the
same for every command). Prints the wall time of the command and the part spent evaluating the scheduler.
"""

from __future__ import annotations

import argparse
import contextlib
import io
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
scheduler: {{name: warmup_stable_decay, t_warmup: 500ba, t_decay: 0.2dur, decay_type: sqrt}}
"""


def bench(batches: int, repeat: int = 3) -> dict[str, float]:
    """Run ``foundry-ext plot`` ``repeat`` times on a ``batches``-long WSD schedule; return the best timings."""
    import llmfoundry.utils.builders  # noqa: F401
    import matplotlib.pyplot  # noqa: F401

    import foundry_ext.cli.plot  # noqa: F401 - imports outside the timing
    from foundry_ext.cli import main

    best = {"total_s": float("inf"), "evaluate_s": float("inf")}
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp, "wsd.yaml")
        config.write_text(CONFIG.format(batches=batches))
        for _ in range(repeat):
            out = io.StringIO()
            start = time.perf_counter()
            with contextlib.redirect_stdout(out):
                rc = main(["plot", str(config), "--out", str(Path(tmp, "lr.png"))])
            total = time.perf_counter() - start
            if rc != 0:
                raise SystemExit(f"plot failed (exit {rc}):\n{out.getvalue()}")
            evaluated = re.search(r"batches evaluated in ([0-9.]+)s", out.getvalue())
            best["total_s"] = min(best["total_s"], total)
            best["evaluate_s"] = min(best["evaluate_s"], float(evaluated.group(1)) if evaluated else float("nan"))
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    result = bench(args.batches, args.repeat)
    print(
        f"plot of a {args.batches:,}-batch WSD schedule: {result['total_s']:.2f}s per command "
        f"(scheduler evaluation {result['evaluate_s']:.2f}s), best of {args.repeat}, imports excluded"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
