"""Cooldown branches of a stable run, trained for real, against the loss law's ranking (issue 31's evidence).

Run: ``.venv/bin/python bench/bench_anneal.py --json bench/data/anneal-branches.json`` (about 10 minutes on 2 busy
CPU cores at the defaults); ``--from-json FILE`` re-makes the report from a recorded run without training.

The model, data and optimizer of ``bench_law_tiny.py`` (the long scenario of ``bench_quality.py``: MPT d_model 32,
1 layer, 2 heads, 33k parameters, batches of 8 sequences, AdamW at 1e-2, warmup 100 batches, evaluation on the whole
validation split), so that the law can be fitted on runs at this scale that this benchmark does not train: the
recorded fitting runs of ``bench/data/law-tiny-1000ba.json`` (constant, cosine to 0.1 and a two-stage step, 1,000
batches, the seeds used here), fitted with ``foundry-ext law fit``.

Per seed (the seed sets the initialisation and the data order):

1. the stable run: ``warmup_stable_decay`` with no decay (``t_decay: 0ba``), ``--stable`` batches, a checkpoint every
   ``--save-interval`` batches (through ``train.py``, in this process);
2. for every branch point ``s`` of ``--points`` and decay length ``L`` of ``--decays``: ``foundry-ext anneal
   CHECKPOINT(s) STABLE.yaml max_duration={s+L}ba --decay {L}ba --shape SHAPE --floor ALPHA --out BRANCH.yaml``, then
   ``train.py BRANCH.yaml``: the branch's final eval loss (after batch ``s + L``) is measured.

Then ``foundry-ext law tune LAW.json STABLE.yaml --branch-from POINTS --decay DECAYS`` predicts every branch's final
loss (with its band). Reported: each branch's prediction beside its measured loss per seed, the seed noise (the spread
between the seeds of the same branch), the law's verdict, which branch the law expects to win and which won, and the
pairs of branches that end at the same batch (the fixed-budget question: decay early and long, or late and short).
Branches of one stable run share its random state, so the noise between branches of one seed is not seed noise.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

ROOT = Path(__file__).resolve().parent.parent
LAW_RUNS = ROOT / "bench" / "data" / "law-tiny-1000ba.json"
FIT_RUNS = ("fit: constant", "fit: cosine", "fit: two-stage")
MODEL = {"model.d_model": 32, "model.n_layers": 1, "model.n_heads": 2, "optimizer.lr": 1.0e-2}  # bench_law_tiny's
_ROW = re.compile(r"^\s*\d+\.\s+(?P<final>[\d.]+)(?:\s+\[(?P<low>[\d.]+), (?P<high>[\d.]+)\])?\s+from=(?P<s>\d+) "
                  r"decay=(?P<n>\d+)ba end=\d+ shape=\w+$")  # fmt: skip


def _register() -> None:
    """Register ``bench_anneal_recorder``: the benchmarks' recorder without its timing wrappers around the schedulers'
    ``step`` (a checkpoint pickles the schedulers, and a wrapper defined in a function cannot be pickled)."""
    import _common  # composer and llm-foundry: imported only to train (--from-json reports without them)
    from llmfoundry import registry

    class Recorder(_common.Recorder):
        def _instrument(self, state: Any) -> None:
            del state  # unused

    if "bench_anneal_recorder" not in registry.callbacks.get_all():
        registry.callbacks.register("bench_anneal_recorder", func=Recorder)


def _cli(argv: list[str]) -> str:
    """``foundry-ext ARGV`` in this process; its standard output (a failure raises with its error line)."""
    from foundry_ext.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    if code != 0:
        raise RuntimeError(f"foundry-ext {' '.join(argv)} exited {code}: {err.getvalue().strip()}")
    return out.getvalue()


def fit_law(seeds: list[int], folder: Path) -> tuple[Path, dict[str, Any]]:
    """``law fit`` on the recorded fitting runs of ``seeds`` (step,lr,loss CSVs); the LAW.json and its record."""
    runs = json.loads(LAW_RUNS.read_text())
    csvs = []
    for name in FIT_RUNS:
        for seed in seeds:
            r = runs[name][str(seed)]
            evals = {int(b): v for b, v in r["evals"]}
            rows = ["step,lr,loss"] + [f"{b},{lr!r},{evals.get(b, '')}" for b, lr in enumerate(r["lr"])]
            last = len(r["lr"])
            rows.append(f"{last},{r['lr'][-1]!r},{evals[last]}")  # the loss after the last batch
            path = folder / f"{name.removeprefix('fit: ').replace(' ', '_')}-seed{seed}.csv"
            path.write_text("\n".join(rows) + "\n")
            csvs.append(str(path))
    law = folder / "law.json"
    _cli(["law", "fit", *csvs, "--out", str(law)])
    doc = json.loads(law.read_text())
    return law, doc


def _stable_config(data: Path, args: argparse.Namespace, seed: int, folder: Path) -> Any:
    import _common

    scheduler = {"name": "warmup_stable_decay", "t_warmup": f"{args.warmup}ba", "t_decay": "0ba"}
    overrides = {
        **MODEL,
        "run_name": f"stable-seed{seed}",
        "max_duration": f"{args.stable}ba",
        "eval_interval": f"{args.eval_interval}ba",
        "eval_subset_num_batches": -1,
        "global_train_batch_size": 8,
        "device_train_microbatch_size": 8,
        "variables.global_seed": seed,
        "save_folder": str(folder),
        "save_interval": f"{args.save_interval}ba",
    }
    cfg = _common.make_config(data, scheduler, **overrides)
    cfg.callbacks = {"bench_anneal_recorder": {}}
    return cfg


def train_seed(data: Path, args: argparse.Namespace, seed: int, work: Path) -> dict[str, Any]:
    """The stable run of ``seed`` and its branches: what each measured."""
    import _common
    import torch
    from omegaconf import OmegaConf as om

    torch.set_num_threads(1)
    _register()
    stable_folder = work / f"stable-seed{seed}" / "checkpoints"
    cfg = _stable_config(data, args, seed, stable_folder)
    stable_yaml = work / f"stable-seed{seed}.yaml"
    om.save(cfg, stable_yaml)
    started = time.perf_counter()
    rec = _common.run(cfg)
    out: dict[str, Any] = {"stable": {"evals": rec.evals, "s": time.perf_counter() - started}, "branches": []}
    print(f"seed {seed}: stable run, {args.stable} batches, {out['stable']['s']:.0f} s, evals {rec.evals}",
          file=sys.stderr, flush=True)  # fmt: skip
    for s in args.points:
        (checkpoint,) = stable_folder.glob(f"ep*-ba{s}-rank0.pt")
        for n in args.decays:
            branch_yaml = work / f"branch-seed{seed}-{s}-{n}.yaml"
            printed = _cli(["anneal", str(checkpoint), str(stable_yaml), f"max_duration={s + n}ba", "--decay", f"{n}ba",
                            "--shape", args.shape, "--floor", str(args.floor), "--out", str(branch_yaml)])  # fmt: skip
            started = time.perf_counter()
            rec = _common.run(om.load(branch_yaml))
            final = rec.evals[-1]
            assert final[0] == s + n, f"the branch's last evaluation is at batch {final[0]}, not {s + n}"
            first_lr = float(re.search(r"\(first\): ([\d.e-]+)", printed).group(1))
            assert math.isclose(rec.lr[0], first_lr, rel_tol=1e-5), (rec.lr[0], printed)
            row = {"from": s, "decay": n, "final": final[1], "lr_first": rec.lr[0], "lr_last": rec.lr[-1],
                   "batches": len(rec.lr), "s": time.perf_counter() - started}  # fmt: skip
            out["branches"].append(row)
            print(f"seed {seed}: branch from {s} over {n}: final eval {final[1]:.4f} after batch {s + n} "
                  f"({row['s']:.0f} s, load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)  # fmt: skip
    return out


def predict_branches(law: Path, args: argparse.Namespace, stable_yaml: Path) -> list[dict[str, Any]]:
    """``law tune --branch-from POINTS --decay DECAYS``: every branch's predicted final loss and band."""
    # the budget holds every branch: law tune leaves out a branch past max_duration, as anneal refuses it
    budget = max(args.points) + max(args.decays)
    printed = _cli(["law", "tune", str(law), str(stable_yaml), f"max_duration={budget}ba",
                    "--branch-from", ",".join(map(str, args.points)), "--decay",
                    ",".join(f"{n}ba" for n in args.decays), "--shape", args.shape,
                    "--floor", str(args.floor)])  # fmt: skip
    rows = []
    for line in printed.splitlines():
        m = _ROW.match(line)
        if m:
            rows.append({"from": int(m["s"]), "decay": int(m["n"]), "predicted": float(m["final"]),
                         "low": float(m["low"]) if m["low"] else None,
                         "high": float(m["high"]) if m["high"] else None})  # fmt: skip
    assert len(rows) == len(args.points) * len(args.decays), printed
    return rows


def report(record: dict[str, Any]) -> str:
    """The Markdown report of a recorded run (what docs/benchmarks.md shows)."""
    seeds = [str(s) for s in record["seeds"]]
    law = record["law"]
    measured = {(b["from"], b["decay"]): {} for b in record["predictions"]}
    for seed in seeds:
        for b in record["runs"][seed]["branches"]:
            measured[(b["from"], b["decay"])][seed] = b["final"]
    pred = {(p["from"], p["decay"]): p for p in record["predictions"]}
    mean = {k: statistics.fmean(v.values()) for k, v in measured.items()}
    spread = {k: max(v.values()) - min(v.values()) for k, v in measured.items()}
    keys = sorted(measured)
    lines = [
        f"law: {law['form']} fitted with `law fit` on {law['runs']} recorded runs, verdict **{law['verdict']}**"
        f" ({law['reason']})",
        "",
        "| branch from | decay | ends at | predicted [band] | "
        + " | ".join(f"seed {s}" for s in seeds)
        + " | mean | seed spread | predicted - mean |",
        "|---|---|---|---|" + "---|" * len(seeds) + "---|---|---|",
    ]
    for k in keys:
        p = pred[k]
        band = f" [{p['low']:.4f}, {p['high']:.4f}]" if p["low"] is not None else ""
        lines.append(
            f"| {k[0]} | {k[1]} | {k[0] + k[1]} | {p['predicted']:.4f}{band} | "
            + " | ".join(f"{measured[k][s]:.4f}" for s in seeds)
            + f" | {mean[k]:.4f} | {spread[k]:.4f} | {p['predicted'] - mean[k]:+.4f} |"
        )
    noise = statistics.fmean(spread.values())
    errors = [abs(pred[k]["predicted"] - mean[k]) for k in keys]
    best_p = min(keys, key=lambda k: pred[k]["predicted"])
    best_m = min(keys, key=lambda k: mean[k])
    pairs = [(a, b) for i, a in enumerate(keys) for b in keys[i + 1 :]]
    alike = sum((pred[a]["predicted"] < pred[b]["predicted"]) == (mean[a] < mean[b]) for a, b in pairs)

    def name(k: tuple[int, int]) -> str:
        return f"from {k[0]} over {k[1]}"

    lines += [
        "",
        f"error |predicted - mean|: mean {statistics.fmean(errors):.4f}, max {max(errors):.4f}; seed spread (max - min"
        f" over the {len(seeds)} seeds of a branch): mean {noise:.4f}, max {max(spread.values()):.4f}",
        f"law's pick: {name(best_p)} (measured {mean[best_p]:.4f}); measured best: {name(best_m)} ({mean[best_m]:.4f});"
        f" {'the same branch' if best_p == best_m else f'gap {mean[best_p] - mean[best_m]:.4f}'}",
        f"pairs of branches ordered alike by the law and the measurement: {alike} of {len(pairs)}",
    ]
    banded = [k for k in keys if pred[k]["low"] is not None]
    if banded:
        held = sum(pred[k]["low"] <= mean[k] <= pred[k]["high"] for k in banded)
        lines.append(f"the law's band holds the measured mean of {held} of {len(banded)} branches")
    for end in sorted({k[0] + k[1] for k in keys}):
        same = [k for k in keys if k[0] + k[1] == end]
        if len(same) < 2:
            continue
        wp, wm = min(same, key=lambda k: pred[k]["predicted"]), min(same, key=lambda k: mean[k])
        gap = max(mean[k] for k in same) - min(mean[k] for k in same)
        noise_here = max(spread[k] for k in same)
        lines.append(
            f"ending at {end}: the law expects {name(wp)} to win, measured {name(wm)} won (by {gap:.4f}, seed spread "
            f"up to {noise_here:.4f}{': within the seed noise' if gap <= noise_here else ''}): "
            f"{'agree' if wp == wm else 'disagree'}"
        )
    for s in sorted({k[0] for k in keys}):
        same = [k for k in keys if k[0] == s]
        wp, wm = min(same, key=lambda k: pred[k]["predicted"]), min(same, key=lambda k: mean[k])
        lines.append(f"from {s}: the law expects the decay over {wp[1]} to win, measured: over {wm[1]}: "
                     f"{'agree' if wp == wm else 'disagree'}")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    def ints(text: str) -> list[int]:
        return [int(x) for x in text.split(",")]

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--stable", type=int, default=800, help="batches of each stable run")
    p.add_argument("--points", type=ints, default=[400, 600, 800], help="branch points (batches)")
    p.add_argument("--decays", type=ints, default=[200, 400], help="decay lengths (batches)")
    p.add_argument("--seeds", type=int, nargs="+", default=[17, 18, 19])
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--eval-interval", type=int, default=200)
    p.add_argument("--save-interval", type=int, default=200)
    p.add_argument("--shape", default="linear")
    p.add_argument("--floor", type=float, default=0.1)
    p.add_argument("--data", type=Path, help="the demo corpus (default: bench/_common.py's DEFAULT_DATA)")
    p.add_argument("--work", type=Path, help="folder for the runs (default: a temporary one, removed)")
    p.add_argument("--json", type=Path, help="write the record here")
    p.add_argument("--from-json", type=Path, help="report on a recorded run, training nothing")
    args = p.parse_args(argv)
    if args.from_json is not None:
        record = json.loads(args.from_json.read_text())
        print(report(record))
        return record
    for s in args.points:
        if s % args.save_interval or s > args.stable:
            p.error(f"--points {s}: must be a multiple of --save-interval and at most --stable")
        for n in args.decays:
            if (s + n) % args.eval_interval:
                p.error(f"--eval-interval {args.eval_interval} must divide every branch's end ({s} + {n})")
    import _common

    data = _common.ensure_data(args.data or _common.DEFAULT_DATA)
    info = _common.machine_info()
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-anneal-")))
        work.mkdir(parents=True, exist_ok=True)
        law, law_doc = fit_law(args.seeds, work)
        runs = {str(seed): train_seed(data, args, seed, work) for seed in args.seeds}
        predictions = predict_branches(law, args, work / f"stable-seed{args.seeds[0]}.yaml")
    reliability = law_doc.get("reliability") or {}
    record = {
        "machine": info,
        "minutes": (time.perf_counter() - started) / 60,
        "seeds": args.seeds,
        "config": {
            k: getattr(args, k) for k in ("stable", "points", "decays", "warmup", "eval_interval", "shape", "floor")
        },
        "law": {
            "form": law_doc["form"],
            "params": law_doc["params"],
            "runs": len(FIT_RUNS) * len(args.seeds),
            "verdict": reliability.get("verdict"),
            "reason": reliability.get("reason", ""),
        },
        "predictions": predictions,
        "runs": runs,
    }
    print(report(record))
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
