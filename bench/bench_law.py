"""The loss law (``foundry_ext.law``): the paper's protocol on its 25M curves, and how fast fit and predict are.

Run: ``.venv/bin/python bench/bench_law.py`` (about a minute on 2 CPU cores); ``--quick`` to smoke (speed only).

1. **Protocol** (Luo et al. 2025, README of thu-yao-01-luo/MultiPowerLaw): fit on ``cosine_24000``,
   ``constant_24000``, ``wsdcon_9`` of ``bench/data/loss-curves/25M``; predict the six others at every logged step
   after the warmup. Mean relative error, the paper's WorstE (each curve's worst relative error, averaged over the
   six: what its README's 0.409% is, by its ``logs/25.log``) and the worst of all; the fitted parameters beside the
   paper's; the same for the Tissue et al. law, and for the paper's own parameters evaluated by this package's law.
2. **Speed**: the fit on the three 24,000-step curves (wall time of ``fit``, the median of 3); a prediction of a
   1,000,000-batch WSD schedule at 1,000 points from its per-batch LR array (median of 5); ``foundry-ext law predict``
   and ``law tune`` (a 3 x 3 grid) on ``yamls/tiny-wsd.yaml``, each a fresh process, imports included.

Not here yet: the issue's evidence (b) and (c) on this package's own tiny models trained on CPU (see docs/law.md).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from foundry_ext.law.fit import fit  # noqa: E402
from foundry_ext.law.predict import predict, predict_points  # noqa: E402
from foundry_ext.law.runs import read_csv  # noqa: E402
from tests.law.paper import CURVES, PAPER, TRAIN, evaluate, summary  # noqa: E402

PAPER_ROW = dict(zip(("L0", "A", "alpha", "B", "C", "beta", "gamma"), PAPER, strict=True))


def protocol() -> list[str]:
    lines = ["| law | fit on 3 curves (s) | mean rel. error | WorstE (mean of per-curve worst) | worst | params |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    runs = [read_csv(str(CURVES / f"{n}.csv")) for n in TRAIN]
    for form in ("multipower", "tissue"):
        result = fit(runs, form)
        mean, mean_worst, worst = summary(evaluate(form, list(result.params.values())))
        params = ", ".join(f"{k} {v:.4g}" for k, v in result.params.items())
        lines.append(f"| {form} (this fit) | {result.seconds:.2f} | {mean:.3%} | {mean_worst:.3%} | {worst:.3%} | "
                     f"{params} |")  # fmt: skip
    mean, mean_worst, worst = summary(evaluate("multipower", PAPER))
    params = ", ".join(f"{k} {v:.4g}" for k, v in PAPER_ROW.items())
    lines.append(f"| multipower, the paper's parameters | - | {mean:.3%} | {mean_worst:.3%} | {worst:.3%} | {params} |")
    return lines


def speed(quick: bool) -> list[str]:
    runs = [read_csv(str(CURVES / f"{n}.csv")) for n in TRAIN]
    fits = [fit(runs).seconds for _ in range(1 if quick else 3)]
    n = 100_000 if quick else 1_000_000
    b = np.arange(n)
    lr = np.where(
        b < 2000, 3e-4 * (b + 1) / 2000, np.where(b < 0.8 * n, 3e-4, 3e-4 - 2.7e-4 * (b - 0.8 * n) / (0.2 * n))
    )
    times = []
    for _ in range(1 if quick else 5):
        start = time.perf_counter()
        predict("multipower", PAPER, lr, predict_points(n, 1000))
        times.append(time.perf_counter() - start)
    lines = [
        f"- fit, multi-power law, 3 curves of 24,000 steps (436 losses): {statistics.median(fits):.2f} s "
        f"(median of {len(fits)})",
        f"- predict a {n:,}-batch WSD at 1,000 points from its LR array: {statistics.median(times):.2f} s "
        f"(median of {len(times)})",
    ]
    if not quick:
        law = Path("/tmp/bench-law.json")
        cli = [str(ROOT / ".venv/bin/foundry-ext"), "law"]
        subprocess.run([*cli, "fit", *(str(CURVES / f"{n}.csv") for n in TRAIN), "--out", str(law)], check=True,
                       capture_output=True)  # fmt: skip
        for label, argv in (
            ("`law predict` on yamls/tiny-wsd.yaml (250 batches)", ["predict", str(law), "yamls/tiny-wsd.yaml"]),
            ("`law predict` on yamls/tiny-plateau.yaml (5,000 batches)",
             ["predict", str(law), "yamls/tiny-plateau.yaml"]),
            ("`law tune` of a 3 x 3 grid on yamls/tiny-wsd.yaml",
             ["tune", str(law), "yamls/tiny-wsd.yaml", "--grid", "scheduler.t_decay=0.1dur,0.2dur,0.3dur",
              "--grid", "scheduler.decay_type=linear,sqrt,cosine"]),
        ):  # fmt: skip
            start = time.perf_counter()
            subprocess.run([*cli, *argv], check=True, capture_output=True, cwd=ROOT)
            lines.append(f"- {label}, a fresh process, imports included: {time.perf_counter() - start:.2f} s")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="speed only, smaller sizes (a smoke run)")
    args = parser.parse_args(argv)
    if not args.quick:
        print("\n".join(protocol()))
        print()
    print("\n".join(speed(args.quick)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
