"""How sure the loss law is: its leave-one-run-out verdict and its bands, chosen on half, confirmed on the rest.

Run: ``.venv/bin/python bench/bench_law_reliability.py --jobs 2`` (about 5 minutes of CPU; every fit, of three runs
and of each pair left when one is left out, is computed once) records every fit to ``--out``;
``--from-json bench/data/law-reliability.json`` re-reports from the shipped records (a second: what the suite does).

Fits: three-run fits of (a) the paper's 25M curves (``bench/data/loss-curves/25M``: all 84 sets of three of its nine
curves) and (b) this package's tiny runs (``bench/data/law-tiny-1000ba.json``: 30 sets of three of its 14 schedules
per seed, seeded, 3 seeds): the curves this repository ships. Each fit is checked leaving each run out
(``reliability.check``) and then predicts every other curve of its data set (of its seed): its real error (the mean
over those curves of their mean relative error after warmup) and, per curve, the final loss with the band's inputs
(the sub-fits' spread, the distance from the fitted runs; the checks' errors give the law's own error).

The fits are split in two halves (alternating, per data set, in a seeded order). On the first half: the verdict's
thresholds (the truth: real error <= 0.3% good, > 1% poor, rough between) and the band's ``k``, ``m``, ``f``, ``c`` (the
narrowest band holding >= 85% of the held-out finals of each data set, within and past the fitted runs). The rest
confirms: the verdict's agreement with the truth, and the band's coverage and width, within the fitted runs' LR area and
length and past them; the band before the law's own error term is reported beside it.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import random
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from foundry_ext.law import reliability as rel  # noqa: E402
from foundry_ext.law.fit import FitError, FitResult, fit  # noqa: E402
from foundry_ext.law.predict import predict  # noqa: E402
from foundry_ext.law.runs import read_csv  # noqa: E402
from foundry_ext.law.trace import Trace  # noqa: E402

CURVES = ROOT / "bench/data/loss-curves/25M"
DATA = ("25M", "tiny")  # the thresholds and the band are chosen on half of these fits, confirmed on the other
DOCS_RUNS = {"cosine_24000", "constant_24000", "wsdcon_9"}  # the paper's and docs/law.md's three fitting runs
TINY = ROOT / "bench/data/law-tiny-1000ba.json"
GOOD_REAL, POOR_REAL = 0.003, 0.01


def tiny_traces(seed: str) -> dict[str, Trace]:
    runs = json.loads(TINY.read_text())
    out = {}
    for name, by_seed in runs.items():
        r = by_seed[seed]
        out[name] = Trace(name, np.array(r["lr"]), np.array([b for b, _ in r["evals"]]),
                          np.array([v for _, v in r["evals"]]))  # fmt: skip
    return out


def sets(quick: bool) -> list[tuple[str, list[str]]]:
    rng = random.Random(2026)
    paper = sorted(p.stem for p in CURVES.glob("*.csv"))
    combos = list(itertools.combinations(paper, 3))
    rng.shuffle(combos)
    out = [("25M", list(c)) for c in combos[: 4 if quick else 84]]
    names = sorted(json.loads(TINY.read_text()))
    for seed in ("17", "18", "19"):
        combos = list(itertools.combinations(names, 3))
        rng.shuffle(combos)
        out += [(f"tiny-{seed}", list(c)) for c in combos[: 2 if quick else 30]]
    return out


@functools.cache
def traces_of(dataset: str) -> dict[str, Trace]:
    if dataset == "25M":
        return {p.stem: read_csv(str(p)) for p in sorted(CURVES.glob("*.csv"))}
    return tiny_traces(dataset.removeprefix("tiny-"))


# every fit of a run (three runs and their leave-one-out pairs), computed once: many sets share a pair
_FITS: dict[tuple[str, tuple[str, ...]], FitResult | str] = {}
_DATASET = [""]


def _fit_job(key: tuple[str, tuple[str, ...]]) -> tuple[tuple[str, tuple[str, ...]], FitResult | str]:
    traces = traces_of(key[0])
    try:
        return key, fit([traces[n] for n in key[1]])
    except FitError as e:
        return key, str(e)


def _cached_fit(traces: list[Trace], form: str = "multipower") -> FitResult:
    """``fit``, from :data:`_FITS` when it holds these runs (the same fit: it is deterministic)."""
    got = _FITS.get((_DATASET[0], tuple(t.name for t in traces))) if form == "multipower" else None
    if got is None:
        return fit(traces, form)
    if isinstance(got, str):
        raise FitError(got)
    return got


def _fits_needed(jobs: list[tuple[str, list[str]]]) -> list[tuple[str, tuple[str, ...]]]:
    keys = {(ds, tuple(names)) for ds, names in jobs}
    keys |= {(ds, tuple(n for n in names if n != left)) for ds, names in jobs for left in names}
    return sorted(keys)


def one(job: tuple[str, list[str]]) -> dict[str, Any] | None:
    dataset, names = job
    _DATASET[0] = dataset
    traces = traces_of(dataset)
    chosen = [traces[n] for n in names]
    try:
        result = _cached_fit(chosen)
    except FitError as e:
        return {"dataset": dataset, "runs": names, "refused": str(e)}
    r = rel.check(chosen, result)
    dom = rel.domain_of(chosen)
    params = list(result.params.values())
    subfits = [c.params for c in r.checks if c.checkable and c.params]
    curves = []
    for name, t in traces.items():
        if name in names:
            continue
        m = t.fit_mask()
        pred = predict("multipower", params, t.lr, t.steps[m])
        err = float(np.mean(np.abs(pred - t.loss[m]) / t.loss[m]))
        final_step = np.array([t.steps[-1]])
        p = float(pred[-1])
        spread = max((abs(float(predict("multipower", s, t.lr, final_step)[0]) - p) for s in subfits), default=None)
        area = float(np.sum(t.lr[: t.steps[-1]]))
        far = max(0.0, np.log(area / dom.lr_area[1]), np.log(t.steps[-1] / dom.batches[1]))
        curves.append({"name": name, "mean_rel": err, "pred": p, "measured": float(t.loss[-1]), "spread": spread,
                       "far": float(far)})  # fmt: skip
    return {
        "dataset": dataset, "runs": names, "train": r.train_mean_rel, "held_out": r.held_out_mean_rel,
        "decaying": r.decaying_runs, "unchecked": sum(not c.checkable for c in r.checks),
        "real": float(np.mean([c["mean_rel"] for c in curves])), "curves": curves,
        "checks": [{"name": c.name, "mean_rel": c.mean_rel, "worst_rel": c.worst_rel, "final_rel": c.final_rel}
                   for c in r.checks],
    }  # fmt: skip


def truth(real: float) -> str:
    return "good" if real <= GOOD_REAL else "poor" if real > POOR_REAL else "rough"


def verdict(r: dict[str, Any], t: dict[str, float]) -> str:
    saved = dict(rel.THRESHOLDS)
    rel.THRESHOLDS.update(t)
    try:
        return rel.judge(r["train"], r["held_out"], r["decaying"], 3, r["unchecked"])[0]
    finally:
        rel.THRESHOLDS.clear()
        rel.THRESHOLDS.update(saved)


def halves(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Alternate halves per data set (``tiny-17``, ``tiny-18``, ``tiny-19`` each)."""
    choose, confirm = [], []
    for ds in sorted({r["dataset"] for r in records}):
        mine = [r for r in records if r["dataset"] == ds]
        choose += mine[0::2]
        confirm += mine[1::2]
    return choose, confirm


def score(records: list[dict[str, Any]], t: dict[str, float]) -> tuple[float, int]:
    """Agreement with the truth, and how many fits called good are poor in truth (the costly mistake)."""
    agree = sum(verdict(r, t) == truth(r["real"]) for r in records)
    false_good = sum(verdict(r, t) == "good" and truth(r["real"]) != "good" for r in records)
    return agree / max(len(records), 1), false_good


def choose_thresholds(records: list[dict[str, Any]]) -> dict[str, float]:
    grid_good_train = [0.001, 0.0015, 0.002, 0.0025, 0.003, 0.004]
    grid_good_ho = [0.003, 0.004, 0.005, 0.006, 0.008, 0.01]
    grid_poor_train = [0.004, 0.006, 0.008, 0.01, 0.015]
    grid_poor_ho = [0.01, 0.0125, 0.015, 0.02, 0.03]
    best, best_key = None, None
    for a, b, c, d in itertools.product(grid_good_train, grid_good_ho, grid_poor_train, grid_poor_ho):
        if c <= a or d <= b:
            continue
        t = {"good_train": a, "good_held_out": b, "poor_train": c, "poor_held_out": d}
        acc, false_good = score(records, t)
        key = (-false_good, acc, -a, -b)  # no false 'good' first, then agreement, then the stricter
        if best_key is None or key > best_key:
            best, best_key = t, key
    assert best is not None
    return best


def error(r: dict[str, Any], band: dict[str, float]) -> float:
    """The band's error term ``e`` of a recorded fit, as ``reliability.model_error`` computes it with ``band``."""
    saved = dict(rel.BAND)
    rel.BAND.update(band)
    try:
        return rel.model_error(r["train"], r.get("checks", []))
    finally:
        rel.BAND.clear()
        rel.BAND.update(saved)


def coverage(
    records: list[dict[str, Any]], band: dict[str, float], where: str = "all"
) -> tuple[float, float, float, int]:
    """Held-out finals inside the band: the share, the median relative width (high - low) / p, the share of widths
    under 2%, and the number of curves; ``where``: ``near`` (within the fitted runs' LR area and length), ``far``
    (past them) or ``all``."""
    hits, widths = [], []
    for r in records:
        e = error(r, band)
        for cv in r["curves"]:
            if cv["spread"] is None or (where == "near" and cv["far"] > 0) or (where == "far" and cv["far"] == 0):
                continue
            w = band["k"] * cv["spread"] + cv["pred"] * (e + band["c"] * cv["far"])
            hits.append(abs(cv["measured"] - cv["pred"]) <= w)
            widths.append(2 * w / cv["pred"])
    if not hits:
        return float("nan"), 0.0, 0.0, 0
    return float(np.mean(hits)), float(np.median(widths)), float(np.mean(np.array(widths) < 0.02)), len(hits)


BEFORE = {"k": 1.0, "m": 0.0, "f": 0.0, "c": 0.01}  # the band before the law's own error term (e = e_train)
BAND_GRID = {
    "k": [0.5, 1.0, 1.5],
    "m": [0.0, 0.5, 1.0, 1.5, 2.0, 3.0],
    "f": [0.0, 0.001, 0.002, 0.003, 0.004, 0.005],
    "c": [0.0, 0.0025, 0.005, 0.01],
}


def choose_band(records: list[dict[str, Any]], target: float = 0.85) -> dict[str, float]:
    """The band holding ``target`` of the held-out finals in each data set, within and past the fitted runs, with
    the narrowest median width on the paper's curves (then on the tiny runs)."""
    best = None
    groups = [[r for r in records if r["dataset"].startswith(ds)] for ds in DATA]
    for values in itertools.product(*BAND_GRID.values()):
        b = dict(zip(BAND_GRID, values, strict=True))
        covered = [coverage(g, b, where)[0] for g in groups for where in ("near", "far")]
        if min(c for c in covered if c == c) < target:  # nan: no curve there
            continue
        key = tuple(coverage(g, b)[1] for g in groups)
        if best is None or key < best[0]:
            best = (key, b)
    return best[1] if best else dict(BEFORE)


def _band_rows(label: str, records: list[dict[str, Any]], datasets: tuple[str, ...], b: dict[str, float]) -> list[str]:
    rows = []
    for ds in datasets:
        mine = [r for r in records if r["dataset"].startswith(ds)]
        if not mine:
            continue
        cells = []
        for where in ("near", "far"):
            cov, width, narrow, n = coverage(mine, b, where)
            cells.append(f"{cov:.0%} of {n} | {width:.2%} | {narrow:.0%}" if n else "- | - | -")
        rows.append(f"| {label} | {ds} | {len(mine)} | " + " | ".join(cells) + " |")
    return rows


def report(records: list[dict[str, Any]]) -> str:
    records = [r for r in records if "refused" not in r]
    choose, confirm = halves(records)
    t = choose_thresholds(choose)
    b = choose_band(choose)
    lines = [f"{len(records)} three-run fits ({len(choose)} to choose, {len(confirm)} to confirm)",
             "thresholds chosen: " + ", ".join(f"{a} {v:g}" for a, v in t.items()),
             "band chosen: " + ", ".join(f"{a} {v:g}" for a, v in b.items()),
             "", "| half | data | fits | verdict = truth | false good | good / rough / poor (verdict) | "
             "good / rough / poor (truth) |",
             "|---|---|---|---|---|---|---|"]  # fmt: skip
    for label, part in (("choose", choose), ("confirm", confirm)):
        for ds in DATA:
            mine = [r for r in part if r["dataset"].startswith(ds)]
            if not mine:
                continue
            acc, fg = score(mine, t)
            v = [verdict(r, t) for r in mine]
            tr = [truth(r["real"]) for r in mine]
            counts = "/".join(str(v.count(x)) for x in rel.VERDICTS)
            true_counts = "/".join(str(tr.count(x)) for x in rel.VERDICTS)
            lines.append(f"| {label} | {ds} | {len(mine)} | {acc:.0%} | {fg} | {counts} | {true_counts} |")
    head = ("| band | data | fits | within the fitted runs: inside | median width | widths < 2% | "
            "past them: inside | median width | widths < 2% |")  # fmt: skip
    for name, band in (("before", BEFORE), ("chosen", b)):
        lines += ["", f"band {name} ({', '.join(f'{a} {v:g}' for a, v in band.items())}), held-out finals:", head,
                  "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
        lines += _band_rows("choose", choose, DATA, band) + _band_rows("confirm", confirm, DATA, band)
    lines += ["", "the docs' three runs (cosine_24000, constant_24000, wsdcon_9; a 25M fit of the confirm half), "
              "the six other curves' finals:",
              "| data | band | inside | widths | measured - predicted |", "|---|---|---|---|---|"]  # fmt: skip
    for ds in DATA:  # the tiny runs have no such set
        docs = [r for r in records if r["dataset"] == ds and set(r["runs"]) == DOCS_RUNS]
        for name, band in (("before", BEFORE), ("chosen", b)):
            for r in docs:
                e = error(r, band)
                ws, ins, errs = [], 0, []
                for cv in r["curves"]:
                    w = band["k"] * cv["spread"] + cv["pred"] * (e + band["c"] * cv["far"])
                    ins += abs(cv["measured"] - cv["pred"]) <= w
                    ws.append(2 * w / cv["pred"])
                    errs.append((cv["measured"] - cv["pred"]) / cv["pred"])
                lines.append(f"| {ds} | {name} | {ins} of {len(ws)} | {min(ws):.2%} to {max(ws):.2%} | "
                             f"{min(errs):+.2%} to {max(errs):+.2%} |")  # fmt: skip
    shipped = {k2: rel.THRESHOLDS[k2] for k2 in t}
    acc, fg = score(confirm, shipped)
    cov, width, narrow, n = coverage(confirm, rel.BAND)
    lines += ["", f"shipped (foundry_ext.law.reliability): thresholds {shipped}, band {rel.BAND}: on the confirm half "
              f"verdict = truth {acc:.0%}, false good {fg}, band coverage {cov:.0%} of {n}, "
              f"median width {width:.2%}, widths < 2% {narrow:.0%}"]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", type=Path, default=Path("/tmp/law-reliability.json"))
    parser.add_argument("--from-json", type=Path)
    args = parser.parse_args(argv)
    if args.from_json:
        records = json.loads(args.from_json.read_text())
    else:
        import multiprocessing

        jobs = sets(args.quick)
        pool = multiprocessing.get_context("fork").Pool(args.jobs) if args.jobs > 1 else None
        mapper = pool.map if pool else map
        _FITS.update(mapper(_fit_job, _fits_needed(jobs)))
        saved, rel.fit = rel.fit, _cached_fit  # reliability.check's refits come from _FITS too
        if pool:
            pool.close()
            pool = multiprocessing.get_context("fork").Pool(args.jobs)  # forked again: the workers see both
            mapper = pool.map
        try:
            records = [r for r in mapper(one, jobs) if r]
        finally:
            rel.fit = saved
            if pool:
                pool.close()
        args.out.write_text(json.dumps(records))
    print(report(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
