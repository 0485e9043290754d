"""Fitting the loss law from later points: does skipping the first part after warmup predict held-out curves better?

Run: ``.venv/bin/python bench/bench_law_variants.py --jobs 2 --out bench/data/law-variants.json`` (about 3 minutes
on 2 CPU cores) records every fit; ``--from-json bench/data/law-variants.json`` re-reports from the records (what the
suite does).

The variant ``skip=k`` fits the multi-power law only on the losses after ``warmup + k * (n - warmup)`` batches of
each run (``n`` its length), ``skip=0`` is the law as shipped. Each is fitted on three-run sets of the paper's 25M
curves (``bench/data/loss-curves/25M``, 24 seeded sets of its 84) and of this package's tiny runs
(``bench/data/law-tiny-1000ba.json``, 8 seeded sets per seed, 3 seeds), and predicts every curve of its data set
not in the set (held out): the mean relative error over each held-out curve's losses after its warmup (all of them,
whatever the variant skipped in fitting), and the relative error of its final loss. A variant wins only if it
lowers both the mean and the final-loss error on held-out curves of a data set, for the paper's curves (where the
law is used) without losing on the tiny runs.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_law_reliability import sets as all_sets  # noqa: E402
from bench_law_reliability import traces_of  # noqa: E402

from foundry_ext.law.fit import FitError, fit  # noqa: E402
from foundry_ext.law.predict import predict  # noqa: E402
from foundry_ext.law.trace import Trace  # noqa: E402

SKIPS = (0.0, 0.1, 0.25)


def sets() -> list[tuple[str, list[str]]]:
    rng = random.Random(32)
    every = all_sets(quick=False)
    paper = [s for s in every if s[0] == "25M"]
    tiny = [s for s in every if s[0] != "25M"]
    rng.shuffle(paper)
    out = paper[:24]
    for seed in ("17", "18", "19"):
        out += [s for s in tiny if s[0] == f"tiny-{seed}"][:8]
    return out


def later(t: Trace, k: float) -> Trace:
    w = int(t.warmup or 0)
    start = w + k * (t.batches - w)
    keep = t.steps > start
    return Trace(t.name, t.lr, t.steps[keep], t.loss[keep], t.warmup)


def one(job: tuple[str, list[str]]) -> list[dict[str, Any]]:
    dataset, names = job
    traces = traces_of(dataset)
    out = []
    for k in SKIPS:
        try:
            params = list(fit([later(traces[n], k) for n in names]).params.values())
        except FitError as e:
            out.append({"dataset": dataset, "runs": names, "skip": k, "refused": str(e)})
            continue
        curves = []
        for name, t in traces.items():
            if name in names:
                continue
            m = t.fit_mask()
            pred = predict("multipower", params, t.lr, t.steps[m])
            rel = np.abs(pred - t.loss[m]) / t.loss[m]
            curves.append({"name": name, "mean_rel": float(np.mean(rel)), "final_rel": float(rel[-1])})
        out.append({"dataset": dataset, "runs": names, "skip": k, "curves": curves})
    return out


def summary(records: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per data set (``25M``, ``tiny``) and skip: fits, held-out curves, their mean and final relative errors."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for data in ("25M", "tiny"):
        for k in SKIPS:
            rs = [r for r in records if r["dataset"].startswith(data) and r["skip"] == k and "curves" in r]
            cs = [c for r in rs for c in r["curves"]]
            out.setdefault(data, {})[f"{k:g}"] = {
                "fits": len(rs),
                "refused": sum(1 for r in records if r["dataset"].startswith(data) and r["skip"] == k) - len(rs),
                "curves": len(cs),
                "mean_rel": float(np.mean([c["mean_rel"] for c in cs])),
                "final_rel": float(np.mean([c["final_rel"] for c in cs])),
            }
    return out


def report(records: list[dict[str, Any]]) -> str:
    lines = [
        "| data | skip | fits | held-out curves | mean rel. error | final-loss rel. error |",
        "|---|---|---|---|---|---|",
    ]
    for data, by_k in summary(records).items():
        for k, s in by_k.items():
            lines.append(f"| {data} | {k} | {s['fits']} | {s['curves']} | {s['mean_rel']:.3%} | {s['final_rel']:.3%} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("/tmp/law-variants.json"))
    parser.add_argument("--from-json", type=Path)
    args = parser.parse_args(argv)
    if args.from_json:
        records = json.loads(args.from_json.read_text())
    else:
        jobs = sets()
        if args.jobs > 1:
            import multiprocessing

            with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
                records = [r for rs in pool.map(one, jobs, chunksize=1) for r in rs]
        else:
            records = [r for rs in map(one, jobs) for r in rs]
        args.out.write_text(json.dumps(records))
    print(report(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
