"""Does ``foundry-ext lr-find``'s suggestion hold on data and models it was not tuned on? Leave-one-corpus-out.

Run: ``.venv/bin/python bench/bench_lr_find.py --cache /tmp/lrf/cache.json --json /tmp/lrf/bench.json`` (about
40 minutes on 2 idle cores; ``--jobs 2`` processes by default; ``--quick`` to smoke).

Cells: 4 corpora (``bench/corpora.py``: grammar, arithmetic, copy, zipf; 64-token rows) x 3 model sizes (MPT, 2
layers, d_model ``xxs`` 16, ``xs`` 32, ``s`` 64) x 2 batch sizes (8 and 32 rows). In every cell:

1. the range test, :func:`foundry_ext.lr_find.lr_find` (what ``foundry-ext lr-find`` runs: llm-foundry's
   ``train()``, 100 batches from 1e-7 to 1 (Lightning's end) and to 10 (fastai's)), once per range-test seed
   (``variables.global_seed`` 17, 18, 19: model initialisation and data order); the raw curve is kept, and every
   candidate (rule x reading x smoothing x ramp end) is computed from it afterwards (the rules only read the
   curve), as the LR the tool's ``optimizer.lr=`` line writes (2 significant digits: what a user trains);
2. the ground truth: constant LRs on a half-decade grid from 1e-3 to 0.1 (one more half decade outward while the
   best is at an end), then the quarter decades either side of the best, 200 batches each, no warmup, for each
   sweep seed 17, 18, 19 (model initialisation and data order; ``bench/lr_sweep.py``: the runs of one seed share
   the initial model and the batches, one loop); a run's score is its eval cross-entropy on the whole val split
   after the last batch, and an LR's score the mean over the sweep seeds.

A suggestion's loss is read off the sweep, linearly in ``log10(lr)`` between the two grid LRs around it
(clamped at the grid's ends; a diverged neighbour makes it infinite); its **regret** is that minus the best score
of the grid. It **passes** if that loss is at most the second-best score among the sweep's half-decade LRs
(1e-3, 3.16e-3, 1e-2, ...): "within the sweep's best two" at the resolution the issue asks for. Its **position**
is its distance from the best grid LR in decades (+ = above). The chosen candidate's own suggestions are then
also trained (same loop, every sweep seed), and pass or fail on their trained mean loss.

Leave-one-corpus-out: for each corpus, the candidate is chosen on the other three corpora's cells only (fewest
failures over their cells x seeds, then the lowest mean regret, then the lowest worst regret) and judged on the
held-out corpus. The range printed around the suggestion (``s / 10**d`` to ``s * 10**d``) is judged the same
way: ``d`` from the other corpora, the held-out best LRs inside it or not. Runs are deterministic on CPU:
``--cache FILE`` keeps every finished unit (range test or sweep), so an interrupted or repeated run only computes
what is missing.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import math
import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common
import corpora

CORPORA = list(corpora.CORPORA)
SIZES: dict[str, dict[str, Any]] = {
    "xxs": {"model.d_model": 16, "model.n_layers": 2},  # the narrowest: the highest best LR of the sizes
    "xs": {"model.d_model": 32, "model.n_layers": 2},
    "s": {"model.d_model": 64, "model.n_layers": 2},
}
BATCH_SIZES = [8, 32]
GRID = [10 ** (k / 2) for k in range(-6, -1)]  # 1e-3 ... 0.1, half decades; extended while the best is at an end
BETAS = [0.98, 0.9, 0.8, 0.6]
READINGS = ("lag-matched", "batch-lr")
FIND_SEEDS = [17, 18, 19]
FIND_MAXES = [1.0, 10.0]  # the range test's last LR: Lightning's max_lr and fastai's end_lr
SWEEP_SEEDS = [17, 18, 19]
COMPARED = {  # shown per cell next to the default
    "the default before this benchmark (chosen on the demo corpus alone)": ("minimum", "lag-matched", 0.8, 1.0),
    "the default rule with fastai's ramp end, 10": ("minimum", "lag-matched", 0.9, 10.0),
}
SWEEP_BATCHES = 200
FIND_BATCHES = 100
DATA_ROOT = Path(os.environ.get("FOUNDRY_EXT_BENCH_CORPORA", "/tmp/foundry-ext-bench-corpora"))


@dataclass(frozen=True)
class Cell:
    corpus: str
    size: str
    batch_size: int

    @property
    def name(self) -> str:
        return f"{self.corpus}/{self.size}/b{self.batch_size}"


def config(data_root: Path, cell: Cell, lr: float, seed: int) -> dict[str, Any]:
    """``tiny-wsd.yaml`` on the cell's corpus, size and batch size, constant LR ``lr``, resolved to plain dicts."""
    from omegaconf import OmegaConf as om

    cfg = _common.make_config(
        data_root / cell.corpus,
        {"name": "constant"},
        **{
            "optimizer.lr": lr,
            "variables.global_seed": seed,
            "variables.max_seq_len": corpora.SEQ_LEN,
            "global_train_batch_size": cell.batch_size,
            "device_train_microbatch_size": cell.batch_size,
            **SIZES[cell.size],
        },
    )
    for key in ("eval_loader", "eval_interval", "eval_subset_num_batches", "callbacks"):
        cfg.pop(key, None)
    return om.to_container(cfg, resolve=True)  # type: ignore[return-value]


# ---------------------------------------------------------------------------------------------------------------
# Work units, run in worker processes (one torch thread each)


def _init_worker() -> None:
    import torch

    torch.set_num_threads(1)


def unit_cell(data_root: str, cell: Cell, finds_wanted: list[tuple[int, float]], find_batches: int,
              lrs: dict[int, list[float]], batches: int) -> dict[str, Any]:  # fmt: skip
    """The cell's missing range tests (per seed and ramp end) and constant-LR runs (per sweep seed), in the shared
    loop."""
    import lr_sweep

    cfg = config(Path(data_root), cell, 1e-3, SWEEP_SEEDS[0])
    finds = {
        (seed, lr_max): lr_sweep.range_test(cfg, seed, lr_max=lr_max, batches=find_batches)
        for seed, lr_max in finds_wanted
    }
    scores, seconds = {}, {}
    for seed, mine in lrs.items():
        if mine:
            start = time.perf_counter()
            scores[seed] = lr_sweep.sweep(cfg, mine, batches, seed)
            seconds[seed] = time.perf_counter() - start
    return {"finds": finds, "scores": scores, "seconds": seconds}


class Cache:
    """Finished units by key; written after each one."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.data: dict[str, Any] = json.loads(path.read_text()) if path and path.exists() else {}

    def put(self, key: str, value: Any) -> None:
        self.data[key] = value
        if self.path:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.data))
            os.replace(tmp, self.path)


def find_key(cell: Cell, seed: int, batches: int, lr_max: float) -> str:
    # the ramp's end is in the key unless it is 1.0 (the first runs' only one: their cache entries stay valid)
    return f"loopfind|{cell.name}|{seed}|{batches}" + ("" if lr_max == 1.0 else f"|max{lr_max!r}")


def sweep_key(cell: Cell, lr: float, batches: int, seed: int) -> str:
    return f"sweep|{cell.name}|{lr!r}|{batches}|{seed}"


def complete(args: argparse.Namespace, cache: Cache, cell: Cell) -> bool:
    """Whether ``cache`` has the cell's whole grid and every range-test seed."""
    return all(
        sweep_key(cell, lr, args.batches, seed) in cache.data for lr in args.grid for seed in args.sweep_seeds
    ) and all(
        find_key(cell, seed, args.find_batches, m) in cache.data for seed in args.find_seeds for m in args.find_maxes
    )


def run_units(args: argparse.Namespace, cache: Cache, cells: list[Cell], extra: dict[Cell, list[float]]) -> None:
    """Compute every missing range test and sweep LR (``extra``: more LRs per cell), one unit per cell, ``--jobs``
    at once."""
    jobs = []
    for cell in cells:
        cost = (1 if cell.size == "xs" else 1.4) * (1 if cell.batch_size == 8 else 2.7)
        wanted = {*args.grid, *extra.get(cell, [])}
        lrs = {
            seed: sorted(lr for lr in wanted if sweep_key(cell, lr, args.batches, seed) not in cache.data)
            for seed in args.sweep_seeds
        }
        seeds = [
            (s, m)
            for s in args.find_seeds
            for m in args.find_maxes
            if find_key(cell, s, args.find_batches, m) not in cache.data
        ]
        n_runs = sum(map(len, lrs.values()))
        if n_runs or seeds:
            jobs.append((cost * (n_runs * 2 + len(seeds)), cell, seeds, lrs))
    # the cheap cells of every corpus first (a run cut short leaves every corpus at some sizes)
    jobs.sort(key=lambda j: (j[1].size == "s", j[1].batch_size, CORPORA.index(j[1].corpus)))
    if not jobs:
        return
    print(f"bench: {len(jobs)} cells to run on {args.jobs} processes", file=sys.stderr, flush=True)
    context = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(args.jobs, mp_context=context, initializer=_init_worker) as pool:
        futures = {
            pool.submit(unit_cell, str(args.data), cell, seeds, args.find_batches, lrs, args.batches): cell
            for _, cell, seeds, lrs in jobs
        }
        for done, future in enumerate(cf.as_completed(futures), 1):
            cell, value = futures[future], future.result()
            for (seed, lr_max), found in value["finds"].items():
                cache.put(find_key(cell, seed, args.find_batches, lr_max), found)
            for seed, scores in value["scores"].items():
                for lr, score in scores.items():
                    cache.put(sweep_key(cell, lr, args.batches, seed), score)
                cache.put(f"seconds|sweep|{cell.name}|{min(scores)!r}|{args.batches}|{len(scores)}|{seed}",
                          value["seconds"][seed])  # fmt: skip
            finds = ", ".join(f"{f['batches_run']} in {f['seconds']:.0f} s" for f in value["finds"].values())
            runs = sum(map(len, value["scores"].values()))
            print(f"bench: [{done}/{len(jobs)}] {cell.name}: range tests ({finds or '-'}); {runs} constant-LR runs "
                  f"in {sum(value['seconds'].values()):.0f} s", file=sys.stderr, flush=True)  # fmt: skip


# ---------------------------------------------------------------------------------------------------------------
# Candidates: rule x reading x beta x ramp end, each a function of a recorded curve


def rule_values(lrs: list[float], losses: list[float], beta: float, reading: str,
                batches: int) -> dict[str, tuple[float | None, bool]]:  # fmt: skip
    """Every candidate rule's suggestion on one curve, one smoothing factor and one reading, as pasted, and whether
    its point was the last of its window (:attr:`~foundry_ext.lr_find.rules.RuleResult.at_window_end`)."""
    from foundry_ext.lr_find.rules import pasted, smooth, smooth_lr, suggest_all

    xs = smooth_lr(lrs, beta) if reading == "lag-matched" else lrs
    found = suggest_all(xs, smooth(losses, beta), batches)
    out = {name: (r.lr, r.at_window_end) for name, r in found.items()}
    (steep, steep_end), (low, low_end) = out["steepest"], out["minimum"]
    # bench-only variants of `minimum` (a smaller fraction of the LR at the minimum)
    for k in (20, 30):
        out[f"minimum/{k}"] = (None if low is None else low * 10 / k, low_end)
    both = steep is not None and low is not None
    out["min(steepest,minimum)"] = (min(steep, low) if both else None, steep_end or low_end)  # type: ignore[type-var]
    # the geometric middle of the two (tried as a combination of steepest descent and minimum; not in the tool)
    out["middle"] = (math.sqrt(steep * low) if both else None, steep_end or low_end)  # type: ignore[operator]
    return {name: (None if lr is None else pasted(lr), end) for name, (lr, end) in out.items()}


Key = tuple[str, str, float, float]  # (rule, reading, beta, the ramp's end lr_max)


def default_key() -> Key:
    """The candidate ``foundry-ext lr-find`` suggests with by default."""
    from foundry_ext.lr_find.rules import DEFAULT_BETA, DEFAULT_LR_MAX, DEFAULT_RULE
    from foundry_ext.lr_find.runner import READINGS

    return (DEFAULT_RULE, READINGS[0], DEFAULT_BETA, DEFAULT_LR_MAX)


def all_suggestions(curves: dict[float, dict[str, Any]], betas: Sequence[float],
                    batches: int) -> dict[Key, tuple[float | None, bool]]:  # fmt: skip
    """Every candidate's suggestion on one cell and seed; ``curves``: the range test per ramp end."""
    out: dict[Key, tuple[float | None, bool]] = {}
    for lr_max, curve in curves.items():
        for reading in READINGS:
            for beta in betas:
                for rule, value in rule_values(curve["lrs"], curve["losses"], beta, reading, batches).items():
                    out[(rule, reading, beta, lr_max)] = value
    return out


# ---------------------------------------------------------------------------------------------------------------
# Scoring against the sweep


def _finite(v: float) -> float:
    return v if v is not None and math.isfinite(v) else math.inf


class Sweep:
    """One cell's scores: best, pass threshold, interpolated loss and position of any LR.

    ``grid``: the half-decade LRs; ``refined``: the quarter-decade LRs on either side of the grid's best (the
    sweep is both); ``trained``: every LR trained in this cell (the sweep and trained suggestions), all used to
    interpolate.
    """

    def __init__(self, trained: dict[float, float], per_seed: dict[float, dict[int, float]] | None = None) -> None:
        self.trained = {lr: _finite(v) for lr, v in sorted(trained.items())}
        self.per_seed = per_seed or {}
        self.grid = [lr for lr in self.trained if _is_half_decade(lr)]
        ranked = sorted(self.grid, key=lambda lr: self.trained[lr])
        self.half_best = ranked[:2]
        self.threshold = self.trained[ranked[1]]
        self.refined = [lr for lr in refinement(ranked[0]) if lr in self.trained]
        self.sweep = sorted([*self.grid, *self.refined])
        self.best_lr = min(self.sweep, key=lambda lr: self.trained[lr])
        self.best = self.trained[self.best_lr]

    def loss(self, lr: float | None) -> float:
        """Interpolated score at ``lr``, linear in log10 lr between trained LRs; clamped at the sweep's ends."""
        if lr is None:
            return math.inf
        if lr in self.trained:
            return self.trained[lr]
        points = [p for p in self.trained if self.sweep[0] <= p <= self.sweep[-1]]
        x, xs = math.log10(lr), [math.log10(p) for p in points]
        if x <= xs[0]:
            return self.trained[points[0]]
        if x >= xs[-1]:
            return self.trained[points[-1]]
        i = next(i for i in range(len(xs) - 1) if xs[i] <= x <= xs[i + 1])
        a, b = self.trained[points[i]], self.trained[points[i + 1]]
        if not (math.isfinite(a) and math.isfinite(b)):
            return math.inf
        return a + (x - xs[i]) / (xs[i + 1] - xs[i]) * (b - a)

    def noise(self) -> float:
        """The median over the finite half-decade LRs of the standard deviation of their score over seeds."""
        sds = [
            statistics.stdev(self.per_seed[lr].values())
            for lr in self.grid
            if len(self.per_seed.get(lr, {})) > 1 and math.isfinite(self.trained[lr])
        ]
        return statistics.median(sds) if sds else math.nan

    def passes(self, lr: float | None) -> bool:
        return self.loss(lr) <= self.threshold

    def position(self, lr: float | None) -> float:
        return math.nan if lr is None else math.log10(lr / self.best_lr)


def _is_half_decade(lr: float) -> bool:
    return abs(math.log10(lr) * 2 - round(math.log10(lr) * 2)) < 1e-9


def extension(sweep: Sweep) -> list[float]:
    """The next half-decade LR outward when the grid's best is at its end (the optimum may lie beyond)."""
    best = sweep.half_best[0]
    if best == sweep.grid[0]:
        return [best / 10**0.5]
    if best == sweep.grid[-1]:
        return [best * 10**0.5]
    return []


def refinement(best: float) -> list[float]:
    """The quarter-decade LRs next to the half-decade grid's best."""
    return [best / 10**0.25, best * 10**0.25]


@dataclass
class Instance:
    """One suggestion: a cell, a range-test seed, a candidate; its LR and how it scores."""

    cell: Cell
    seed: int
    key: Key
    lr: float | None
    loss: float
    regret: float
    passes: bool
    position: float
    at_window_end: bool


def instances(cells: list[Cell], sweeps: dict[Cell, Sweep], sugg: dict[tuple[Cell, int], dict[Key, Any]],
              seeds: list[int]) -> dict[Key, list[Instance]]:  # fmt: skip
    out: dict[Key, list[Instance]] = {}
    for cell in cells:
        sweep = sweeps[cell]
        for seed in seeds:
            for key, (lr, end) in sugg[(cell, seed)].items():
                loss = sweep.loss(lr)
                out.setdefault(key, []).append(
                    Instance(cell, seed, key, lr, loss, loss - sweep.best, sweep.passes(lr), sweep.position(lr), end)
                )
    return out


def choose(insts: dict[Key, list[Instance]], corpora_in: set[str]) -> tuple[Key, tuple[int, float, float]]:
    """The candidate with the fewest failures on ``corpora_in``'s instances, then lowest mean, then worst regret."""

    def score(key: Key) -> tuple[int, float, float]:
        mine = [i for i in insts[key] if i.cell.corpus in corpora_in]
        regrets = [min(i.regret, 10.0) for i in mine]
        return (sum(not i.passes for i in mine), statistics.fmean(regrets), max(regrets))

    best = min(insts, key=lambda k: (score(k), k))
    return best, score(best)


# ---------------------------------------------------------------------------------------------------------------
# Report


def _fmt_loss(v: float) -> str:
    return f"{v:.3f}" if math.isfinite(v) else "div."


def _label(key: Key) -> str:
    rule, reading, beta, lr_max = key
    return f"{rule}, {reading}, beta {beta:g}, ramp to {lr_max:g}"


def analyse(args: argparse.Namespace, cache: Cache, cells: list[Cell]) -> dict[str, Any]:
    sweeps: dict[Cell, Sweep] = {}
    for cell in cells:
        per_seed: dict[float, dict[int, float]] = {}
        for key, v in cache.data.items():
            parts = key.split("|")
            if parts[0] == "sweep" and parts[1] == cell.name and int(parts[3]) == args.batches:
                per_seed.setdefault(float(parts[2]), {})[int(parts[4])] = _finite(v)
        # an LR's score is its mean over the sweep seeds (infinite if any seed diverged)
        trained = {
            lr: statistics.fmean(by_seed[s] for s in args.sweep_seeds)
            for lr, by_seed in per_seed.items()
            if all(s in by_seed for s in args.sweep_seeds)
        }
        sweeps[cell] = Sweep(trained, {lr: per_seed[lr] for lr in trained})
    sugg = {
        (cell, seed): all_suggestions(
            {m: cache.data[find_key(cell, seed, n, m)] for m in args.find_maxes}, args.betas, n
        )
        for n in [args.find_batches]
        for cell in cells
        for seed in args.find_seeds
    }
    insts = instances(cells, sweeps, sugg, args.find_seeds)
    present = sorted({c.corpus for c in cells}, key=CORPORA.index)
    folds = {}
    for held in present:
        key, score = choose(insts, set(present) - {held}) if len(present) > 1 else choose(insts, {held})
        folds[held] = {"key": key, "train_score": score}
    overall, overall_score = choose(insts, set(present))
    return {"sweeps": sweeps, "sugg": sugg, "insts": insts, "folds": folds, "overall": overall,
            "overall_score": overall_score, "present": present}  # fmt: skip


def report(args: argparse.Namespace, cache: Cache, cells: list[Cell], res: dict[str, Any]) -> str:
    sweeps, insts, folds, present = res["sweeps"], res["insts"], res["folds"], res["present"]
    seeds = args.find_seeds
    columns = sorted({lr for cell in cells for lr in sweeps[cell].grid})
    lines = [
        f"Cells: {', '.join(present)} x sizes {', '.join(sorted({c.size for c in cells}))} x batch sizes "
        f"{', '.join(str(b) for b in sorted({c.batch_size for c in cells}))} (rows of {corpora.SEQ_LEN} tokens). "
        f"Sweep: constant LRs {args.grid[0]:.3g}-{args.grid[-1]:.3g} (half decades; one more outward while the "
        f"best is at an end) and the quarter decades either side of the best, "
        f"{args.batches} batches, seeds {', '.join(map(str, args.sweep_seeds))} (a score is the mean over them). "
        f"Range test: {args.find_batches} batches, 1e-7 -> {' and '.join(f'{m:g}' for m in args.find_maxes)}, seeds "
        f"{', '.join(map(str, seeds))}. Candidates: {len(insts)} (rule x reading x beta "
        f"{', '.join(map(str, args.betas))} x ramp end).",
        "",
        "### Sweeps (final eval cross-entropy, mean over the sweep seeds; the best half-decade pair in bold; div. = "
        "diverged; noise: the median over the finite half-decade LRs of the standard deviation over seeds)",
        "",
        "| cell | " + " | ".join(f"{lr:.2g}" for lr in columns) + " | refined: LR (CE) | best | pass if <= | noise |",
        "|---|" + "---:|" * len(columns) + "---|---:|---:|---:|",
    ]
    for cell in cells:
        s = sweeps[cell]
        vals = [
            "-" if lr not in s.trained else f"**{_fmt_loss(s.trained[lr])}**" if lr in s.half_best
            else _fmt_loss(s.trained[lr]) for lr in columns
        ]  # fmt: skip
        refined = ", ".join(f"{lr:.2g} ({_fmt_loss(s.trained[lr])})" for lr in s.refined) or "-"
        lines.append(f"| {cell.name} | {' | '.join(vals)} | {refined} | {s.best_lr:.2g} | {s.threshold:.3f} | "
                     f"{s.noise():.3f} |")  # fmt: skip
    # leave-one-corpus-out
    lines += ["", "### Leave-one-corpus-out", "",
              "| held-out corpus | chosen on the other corpora | their fails / instances, mean regret | held-out: "
              "fails / instances | held-out mean regret | held-out worst regret |",
              "|---|---|---|---|---:|---:|"]  # fmt: skip
    for held, fold in folds.items():
        key = fold["key"]
        mine = [i for i in insts[key] if i.cell.corpus == held]
        others = [i for i in insts[key] if i.cell.corpus != held]
        f, mean, _ = fold["train_score"]
        lines.append(
            f"| {held} | {_label(key)} | {f} / {len(others)}, {mean:.3f} | {sum(not i.passes for i in mine)} / "
            f"{len(mine)} | {statistics.fmean(i.regret for i in mine):.3f} | {max(i.regret for i in mine):.3f} |"
        )
    same = len({tuple(f["key"]) for f in folds.values()}) == 1
    fails, mean_regret, _ = res["overall_score"]
    lines += ["", f"Same candidate chosen in every fold: {'yes' if same else 'no'}. Chosen on all corpora: "
              f"{_label(res['overall'])} ({fails} fails, mean regret {mean_regret:.3f})."]  # fmt: skip
    # every candidate, held-out view: fails per corpus
    lines += ["", "### Every candidate: failures per corpus (of cells x seeds), mean and worst regret, all cells", "",
              "| rule | reading | beta | ramp to | " + " | ".join(present) + " | fails | mean regret | worst regret | "
              "seed spread (decades) | at window end |",
              "|---|---|---:|---:|" + "---:|" * len(present) + "---:|---:|---:|---:|---:|"]  # fmt: skip
    ranked = sorted(insts, key=lambda k: (sum(not i.passes for i in insts[k]),
                                          statistics.fmean(min(i.regret, 10) for i in insts[k])))  # fmt: skip
    for key in ranked:
        mine = insts[key]
        per = [sum(not i.passes for i in mine if i.cell.corpus == c) for c in present]
        spreads = []
        for cell in cells:
            lrs = [i.lr for i in mine if i.cell == cell and i.lr is not None]
            if len(lrs) > 1:
                spreads.append(math.log10(max(lrs) / min(lrs)))
        spread = statistics.fmean(spreads) if spreads else math.nan
        worst = max(i.regret for i in mine)
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]:g} | {key[3]:g} | {' | '.join(map(str, per))} | {sum(per)} / "
            f"{len(mine)} | {statistics.fmean(min(i.regret, 10) for i in mine):.3f} | {worst:.3f} | {spread:.2f} | "
            f"{sum(i.at_window_end for i in mine)} / {len(mine)} |".replace("inf", "div.")
        )
    # per cell detail for the chosen candidate (held out) and the previous default
    shown = [
        ("held out: each fold's choice", None),
        ("the tool's default", default_key()),
        *((title, key) for title, key in COMPARED.items() if key in insts),
    ]
    for title, fixed in shown:
        what = "the candidate chosen without that corpus" if fixed is None else _label(fixed)
        head = " | ".join(f"seed {s}: LR, position (dec.), regret, trained CE" for s in seeds)
        lines += ["", f"### Per cell: {title} ({what})", "", f"| cell | best LR (CE) | {head} | pass (every seed) |",
                  "|---|---|" + "---|" * len(seeds) + "---|"]  # fmt: skip
        for cell in cells:
            key = folds[cell.corpus]["key"] if fixed is None else fixed
            s = sweeps[cell]
            parts, ok = [], True
            for seed in seeds:
                inst = next(i for i in insts[key] if i.cell == cell and i.seed == seed)
                trained = s.trained.get(inst.lr) if inst.lr is not None else None
                verdict = inst.passes if trained is None else trained <= s.threshold
                ok &= verdict
                trained_text = "-" if trained is None else _fmt_loss(trained)
                lr_text = "none" if inst.lr is None else f"{inst.lr:.2g}"
                parts.append(f"{lr_text}, {inst.position:+.2f}, {inst.regret:.3f}, {trained_text}")
            verdict = "yes" if ok else "**no**"
            lines.append(f"| {cell.name} | {s.best_lr:.2g} ({s.best:.3f}) | {' | '.join(parts)} | {verdict} |")
    lines += positions(insts, res["overall"], present)
    lines += ranges(insts, folds, present)
    lines += cost(args, cache, cells)
    return "\n".join(lines)


def positions(insts: dict[Key, list[Instance]], key: Key, present: list[str]) -> list[str]:
    """Where the sweep's best LR lay relative to ``key``'s suggestion, per corpus: the band that brackets it."""
    lines = ["", f"### Where the best LR lay, relative to {_label(key)}'s suggestion (decades; + = suggestion above)",
             "", "| corpus | position: min, median, max | within half a decade |", "|---|---|---:|"]  # fmt: skip
    for corpus in [*present, "all"]:
        mine = [i for i in insts[key] if corpus in ("all", i.cell.corpus) and math.isfinite(i.position)]
        pos = [i.position for i in mine]
        near = sum(abs(p) <= 0.5 + 1e-9 for p in pos)
        lines.append(f"| {corpus} | {min(pos):+.2f}, {statistics.median(pos):+.2f}, {max(pos):+.2f} | "
                     f"{near} / {len(pos)} |")  # fmt: skip
    return lines


def ranges(insts: dict[Key, list[Instance]], folds: dict[str, Any], present: list[str]) -> list[str]:
    """The range printed around the suggestion, ``s / 10**d`` to ``s * 10**d``: ``d`` fitted leave-one-corpus-out
    (the largest distance between the suggestion and the best LR on the other corpora, for that fold's candidate),
    judged by whether the held-out corpus's best LRs lie in it; then the tool's ``RANGE_DECADES`` on every cell."""
    from foundry_ext.lr_find.rules import RANGE_DECADES

    lines = ["", "### The range around the suggestion: d fitted leave-one-corpus-out (best LR within s / 10**d .. "
             "s * 10**d)", "", "| held-out corpus | candidate | d from the other corpora | held out: best LR in the "
             "range |", "|---|---|---:|---:|"]  # fmt: skip
    tol = 1e-9  # positions are differences of logs: a best LR exactly d decades away is inside
    for held, fold in folds.items():
        mine = [i for i in insts[fold["key"]] if math.isfinite(i.position)]
        d = max((abs(i.position) for i in mine if i.cell.corpus != held), default=math.nan)
        inside = sum(abs(i.position) <= d + tol for i in mine if i.cell.corpus == held)
        n = sum(i.cell.corpus == held for i in mine)
        lines.append(f"| {held} | {_label(fold['key'])} | {d:.2f} | {inside} / {n} |")
    default = default_key()
    if default in insts:
        mine = insts[default]
        inside = sum(abs(i.position) <= RANGE_DECADES + tol for i in mine)
        lines += ["", f"The tool's range (d = {RANGE_DECADES:g}, its default candidate): the best LR inside on "
                  f"{inside} / {len(mine)} instances."]  # fmt: skip
    return lines


def cost(args: argparse.Namespace, cache: Cache, cells: list[Cell]) -> list[str]:
    """What a range test costs (batches, seconds), per size and batch size, over corpora and seeds."""
    lines = ["", "### Cost of the range test (the tool's 100 batches; seconds of `lr_find`: build + batches)", "",
             "| size | batch | batches run (min-max) | seconds (median, min-max) | sweep: seconds per 200-batch run |",
             "|---|---:|---|---|---:|"]  # fmt: skip
    for size in sorted({c.size for c in cells}, key=list(SIZES).index):
        for bs in sorted({c.batch_size for c in cells}):
            mine = [c for c in cells if c.size == size and c.batch_size == bs]
            finds = [
                cache.data[find_key(c, s, args.find_batches, m)]
                for c in mine
                for s in args.find_seeds
                for m in args.find_maxes
            ]
            runs = [finds_i["batches_run"] for finds_i in finds]
            secs = [f["seconds"] for f in finds]
            per_run = [v / int(k.split("|")[5]) for k, v in cache.data.items()
                       if k.startswith("seconds|sweep|") and k.split("|")[2] in {c.name for c in mine}]  # fmt: skip
            lines.append(
                f"| {size} | {bs} | {min(runs)}-{max(runs)} | {statistics.median(secs):.1f}, "
                f"{min(secs):.1f}-{max(secs):.1f} | {statistics.median(per_run) if per_run else math.nan:.1f} |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpora", nargs="+", default=CORPORA, choices=CORPORA)
    parser.add_argument("--sizes", nargs="+", default=list(SIZES), choices=list(SIZES))
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=BATCH_SIZES)
    parser.add_argument("--batches", type=int, default=SWEEP_BATCHES, help="batches of each constant-LR run")
    parser.add_argument("--find-batches", type=int, default=FIND_BATCHES, help="batches of the range test")
    parser.add_argument("--find-seeds", type=int, nargs="+", default=FIND_SEEDS)
    parser.add_argument("--find-maxes", type=float, nargs="+", default=FIND_MAXES, help="the range tests' last LRs")
    parser.add_argument("--sweep-seeds", type=int, nargs="+", default=SWEEP_SEEDS)
    parser.add_argument("--betas", type=float, nargs="+", default=BETAS)
    parser.add_argument("--grid", type=float, nargs="+", default=GRID, help="the sweep's LRs")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--data", type=Path, default=DATA_ROOT, help="where the corpora are written")
    parser.add_argument("--cache", type=Path, help="JSON of finished units, read and extended")
    parser.add_argument("--json", type=Path, help="also write the analysis here")
    parser.add_argument("--no-verify", action="store_true", help="do not train the chosen candidates' suggestions")
    parser.add_argument(
        "--no-run", action="store_true", help="train nothing: report the cells --cache has whole (PARTIAL if not all)"
    )
    parser.add_argument("--quick", action="store_true", help="smoke: copy corpus, xs, batch 8, 30-batch runs, 1 seed")
    args = parser.parse_args(argv)
    if args.quick:
        args.corpora, args.sizes, args.batch_sizes = ["copy"], ["xs"], [8]
        args.batches, args.find_batches, args.find_seeds, args.sweep_seeds = 30, 30, [17], [17]
        args.grid = [10 ** (k / 2) for k in range(-6, -1)]
    start = time.perf_counter()
    info = _common.machine_info()
    for name in args.corpora:
        corpora.write(args.data, name)
    cells = [Cell(c, s, b) for c in args.corpora for s in args.sizes for b in args.batch_sizes]
    cache = Cache(args.cache)
    missing: list[Cell] = []
    if args.no_run:
        missing = [cell for cell in cells if not complete(args, cache, cell)]
        cells = [cell for cell in cells if cell not in missing]
    if not cells:
        print(f"no cell of {args.cache} is complete yet")
        return 1
    run_units(args, cache, cells, {})
    res = analyse(args, cache, cells)
    for _ in range(4 if not (args.no_verify or args.no_run) else 0):
        # refine each sweep around its best, and train what each fold chose (on its held-out corpus) and the
        # choice on all corpora, for every seed; again if the refined sweeps changed a choice
        extra: dict[Cell, list[float]] = {}
        for cell in cells:
            extra[cell] = extension(res["sweeps"][cell]) or refinement(res["sweeps"][cell].half_best[0])
            for key in (res["folds"][cell.corpus]["key"], res["overall"]):
                extra[cell] += [lr for seed in args.find_seeds if (lr := res["sugg"][(cell, seed)][key][0]) is not None]
        if all(
            sweep_key(cell, lr, args.batches, seed) in cache.data
            for cell in cells
            for lr in extra[cell]
            for seed in args.sweep_seeds
        ):
            break
        run_units(args, cache, cells, extra)
        res = analyse(args, cache, cells)
    minutes = (time.perf_counter() - start) / 60
    print(_common.header(info, "python bench/bench_lr_find.py " + " ".join(argv if argv is not None else sys.argv[1:])))
    print()
    if missing:
        print(f"**PARTIAL**: {len(missing)} of {len(missing) + len(cells)} cells not finished and left out: "
              f"{', '.join(cell.name for cell in missing)}.\n")  # fmt: skip
    print(report(args, cache, cells, res))
    print(f"\n{minutes:.1f} min in all.")
    if args.json:
        args.json.write_text(json.dumps({
            "folds": {k: {"key": list(v["key"]), "train_score": v["train_score"]} for k, v in res["folds"].items()},
            "overall": list(res["overall"]),
            "minutes": minutes,
            "instances": [[i.cell.name, i.seed, *i.key, i.lr, i.loss, i.regret, i.passes, i.position]
                          for k in res["insts"] for i in res["insts"][k]],
        }, default=str))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
