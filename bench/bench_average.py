"""Ending a stable run by averaging its checkpoints, against cooldown branches and Composer's EMA (issue 44's evidence).

Run: ``.venv/bin/python bench/bench_average.py --json bench/data/average.json`` (about 15 minutes on 2 busy CPU
cores at the defaults); ``--from-json FILE`` re-makes the report from a recorded run without training.

The model, data and optimizer of ``bench_anneal.py`` (MPT d_model 32, 1 layer, 2 heads, 33k parameters, batches of 8
sequences, AdamW at 1e-2, evaluation on the whole validation split), warmup ``--warmup`` batches. Per seed (the seed
sets the initialisation and the data order), at every budget ``B`` of ``--budgets``:

(a) **stable**: the stable run (``warmup_stable_decay`` with no decay, a checkpoint every ``--save-interval``
    batches) evaluated at ``B``;
(b) **average**: ``foundry-ext average SAVE_FOLDER --batches :B --last K [--every N]`` for each window of
    ``--windows`` (``K`` checkpoints ``N`` intervals apart, ending at ``B``), evaluated through ``train.py`` with
    ``load_path=AVG load_weights_only=true eval_first=true`` (the documented command);
(c) **anneal**: ``foundry-ext anneal`` branches from ``B - L`` decaying over ``L`` to ``B`` (linear to 0), for each
    fraction of ``--decays`` (``L = f B``);
(d) **average + anneal**: the average of the last ``--avg-anneal-k`` checkpoints up to ``B - L`` and an ``anneal``
    branch from that averaged checkpoint over ``L = --avg-anneal-decay x B`` to ``B``;
(e) **EMA**: the same stable run with Composer's ``EMA`` algorithm (``half_life`` of ``--ema-half-life``), evaluated
    at ``B`` (Composer evaluates the EMA weights). llm-foundry 0.22 does not register Composer's EMA for YAML; this
    benchmark registers it (``registry.algorithms``) in its process. EMA changes no training step: the run's train
    losses equal the stable run's, which is checked.

Reported: each method's eval loss per seed, the mean over the seeds, the seed spread (max - min), the difference to
the stable checkpoint and to the best cooldown, and what each cost (batches trained beyond the stable run, seconds).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_anneal import MODEL, _cli, _register


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",")]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",")]


def _windows(text: str) -> list[tuple[int, int]]:
    """``3x1,6x1,6x2``: (K checkpoints, every N-th)."""
    out = []
    for item in text.split(","):
        k, _, n = item.partition("x")
        out.append((int(k), int(n or 1)))
    return out


def _stable_config(data: Path, args: argparse.Namespace, seed: int, folder: Path | None, ema: bool = False) -> Any:
    import _common

    scheduler = {"name": "warmup_stable_decay", "t_warmup": f"{args.warmup}ba", "t_decay": "0ba"}
    overrides: dict[str, Any] = {
        **MODEL,
        "run_name": f"stable-seed{seed}",
        "max_duration": f"{max(args.budgets)}ba",
        "eval_interval": f"{args.eval_interval}ba",
        "eval_subset_num_batches": -1,
        "global_train_batch_size": 8,
        "device_train_microbatch_size": 8,
        "variables.global_seed": seed,
    }
    if folder is not None:
        overrides.update({"save_folder": str(folder), "save_interval": f"{args.save_interval}ba"})
    cfg = _common.make_config(data, scheduler, **overrides)
    cfg.callbacks = {"bench_anneal_recorder": {}}
    if ema:
        cfg.algorithms = {**dict(cfg.get("algorithms") or {}), "ema": {"half_life": f"{args.ema_half_life}ba"}}
    return cfg


def _register_ema() -> None:
    from composer.algorithms import EMA
    from llmfoundry import registry

    if "ema" not in registry.algorithms.get_all():
        registry.algorithms.register("ema", func=EMA)


def _evaluate(stable_yaml: Path, checkpoint: Path) -> float:
    """The eval loss of ``checkpoint``'s weights on the run's eval set: docs/average.md's command, in this process."""
    import _common
    from omegaconf import OmegaConf as om

    cfg = om.load(stable_yaml)
    for key in ("save_folder", "save_interval"):
        cfg.pop(key, None)
    for key, value in {"load_path": str(checkpoint), "load_weights_only": True, "eval_first": True,
                       "max_duration": "1ba", "scheduler.t_warmup": "0ba"}.items():  # fmt: skip
        om.update(cfg, key, value, merge=False)
    rec = _common.run(cfg)
    assert rec.evals and rec.evals[0][0] == 0, rec.evals
    return rec.evals[0][1]


def _branch(work: Path, name: str, checkpoint: Path, stable_yaml: Path, end: int, decay: int) -> tuple[float, float]:
    """An ``anneal`` branch from ``checkpoint`` over ``decay`` batches to ``end``: its final eval loss, seconds."""
    import _common
    from omegaconf import OmegaConf as om

    branch_yaml = work / f"{name}.yaml"
    _cli(["anneal", str(checkpoint), str(stable_yaml), f"max_duration={end}ba", f"save_folder={work / name}",
          "--decay", f"{decay}ba", "--shape", "linear", "--floor", "0", "--out", str(branch_yaml)])  # fmt: skip
    started = time.perf_counter()
    rec = _common.run(om.load(branch_yaml))
    assert rec.evals[-1][0] == end, rec.evals
    return rec.evals[-1][1], time.perf_counter() - started


def train_seed(data: Path, args: argparse.Namespace, seed: int, work: Path) -> dict[str, Any]:
    import _common
    import torch
    from omegaconf import OmegaConf as om

    torch.set_num_threads(1)
    _register()
    _register_ema()
    folder = work / f"stable-seed{seed}" / "checkpoints"
    cfg = _stable_config(data, args, seed, folder)
    stable_yaml = work / f"stable-seed{seed}.yaml"
    om.save(cfg, stable_yaml)
    started = time.perf_counter()
    rec = _common.run(cfg)
    out: dict[str, Any] = {"stable_s": time.perf_counter() - started, "budgets": {}}
    evals = dict(rec.evals)
    started = time.perf_counter()
    ema = _common.run(_stable_config(data, args, seed, None, ema=True))
    out["ema_s"] = time.perf_counter() - started
    out["ema_same_training"] = ema.loss == rec.loss  # EMA changes no training step: the same losses, bitwise
    ema_evals = dict(ema.evals)
    say = lambda text: print(f"seed {seed}: {text}", file=sys.stderr, flush=True)  # noqa: E731
    say(f"stable {out['stable_s']:.0f} s, EMA run {out['ema_s']:.0f} s (same training: {out['ema_same_training']})")
    # the documented evaluation of a plain checkpoint equals the run's own evaluation of it
    check = _evaluate(stable_yaml, folder / f"ep0-ba{max(args.budgets)}-rank0.pt")
    out["eval_path_check"] = [check, evals[max(args.budgets)]]
    for b in args.budgets:
        row: dict[str, Any] = {"stable": evals[b], "ema": ema_evals[b], "average": {}, "anneal": {}}
        for k, n in args.windows:
            avg = work / f"avg-seed{seed}-{b}-{k}x{n}.pt"
            started = time.perf_counter()
            _cli(["average", str(folder), "--batches", f":{b}", "--every", str(n), "--last", str(k), "--out", str(avg)])
            seconds = time.perf_counter() - started
            row["average"][f"{k}x{n}"] = {"loss": _evaluate(stable_yaml, avg), "s": seconds,
                                          "span": (k - 1) * n * args.save_interval}  # fmt: skip
            avg.unlink()
        for f in args.decays:
            decay = round(f * b / args.save_interval) * args.save_interval
            loss, seconds = _branch(work, f"anneal-seed{seed}-{b}-{decay}", folder / f"ep0-ba{b - decay}-rank0.pt",
                                    stable_yaml, b, decay)  # fmt: skip
            row["anneal"][str(decay)] = {"loss": loss, "s": seconds}
        decay = round(args.avg_anneal_decay * b / args.save_interval) * args.save_interval
        avg = work / f"avg-anneal-seed{seed}-{b}-avg" / "avg.pt"  # a folder of its own: anneal's source folder
        avg.parent.mkdir()
        last = str(args.avg_anneal_k)
        _cli(["average", str(folder), "--batches", f":{b - decay}", "--last", last, "--out", str(avg)])
        loss, seconds = _branch(work, f"avg-anneal-seed{seed}-{b}", avg, stable_yaml, b, decay)
        row["average_anneal"] = {"decay": decay, "k": args.avg_anneal_k, "loss": loss, "s": seconds}
        out["budgets"][str(b)] = row
        say(f"budget {b}: stable {row['stable']:.4f}, EMA {row['ema']:.4f}, averages "
            + ", ".join(f"{w} {v['loss']:.4f}" for w, v in row["average"].items())
            + ", anneal " + ", ".join(f"{d} {v['loss']:.4f}" for d, v in row["anneal"].items())
            + f", average+anneal {loss:.4f}")  # fmt: skip
    return out


def report(record: dict[str, Any]) -> str:
    """The Markdown report of a recorded run (what docs/benchmarks.md shows)."""
    seeds = [str(s) for s in record["seeds"]]
    cfg = record["config"]
    lines = [
        "| budget | method | cost beyond the stable run | " + " | ".join(f"seed {s}" for s in seeds)
        + " | mean | seed spread | vs stable (mean) | vs stable, each seed |",
        "|---|---|---|" + "---|" * len(seeds) + "---|---|---|---|",
    ]  # fmt: skip
    summary = []
    for b in cfg["budgets"]:
        rows = record["runs"][seeds[0]]["budgets"][str(b)]
        methods: list[tuple[str, str, Any]] = [("stable checkpoint", "none", lambda r: r["stable"])]
        for w in rows["average"]:
            k, n = w.split("x")
            span = rows["average"][w]["span"]
            methods.append((f"average of {k}, every {int(n) * cfg['save_interval']} ba (span {span} ba)",
                            "one `average` + nothing trained", lambda r, w=w: r["average"][w]["loss"]))  # fmt: skip
        for d in rows["anneal"]:
            methods.append((f"anneal: linear decay over the last {d} ba", f"{d} ba trained (a branch)",
                            lambda r, d=d: r["anneal"][d]["loss"]))  # fmt: skip
        aa = rows["average_anneal"]
        methods.append((f"average of {aa['k']} to {b - aa['decay']}, then anneal {aa['decay']} ba",
                        f"{aa['decay']} ba trained", lambda r: r["average_anneal"]["loss"]))  # fmt: skip
        methods.append((f"Composer EMA (half-life {cfg['ema_half_life']} ba)", "an EMA copy updated every batch",
                        lambda r: r["ema"]))  # fmt: skip
        stables = [record["runs"][s]["budgets"][str(b)]["stable"] for s in seeds]
        stable = statistics.fmean(stables)
        means = {}
        for name, cost, get in methods:
            values = [get(record["runs"][s]["budgets"][str(b)]) for s in seeds]
            mean = statistics.fmean(values)
            means[name] = mean
            paired = [v - st for v, st in zip(values, stables, strict=True)]  # the same seed: the same run
            lines.append(f"| {b} | {name} | {cost} | " + " | ".join(f"{v:.4f}" for v in values)
                         + f" | {mean:.4f} | {max(values) - min(values):.4f} | {mean - stable:+.4f} | "
                         + f"{min(paired):+.4f} to {max(paired):+.4f} |")  # fmt: skip
        best = min(means, key=means.get)
        summary.append(f"budget {b}: best {best} ({means[best]:.4f}; the stable checkpoint {stable:.4f})")
    checks = [record["runs"][s]["eval_path_check"] for s in seeds]
    same = all(record["runs"][s]["ema_same_training"] for s in seeds)
    lines += ["", *summary, "",
              "the documented evaluation of the last stable checkpoint against the run's own evaluation of it: "
              + ", ".join(f"{a:.6f} / {b:.6f}" for a, b in checks),
              f"EMA runs trained exactly as the stable runs (same train losses, bitwise): {same}",
              f"time: stable runs {statistics.fmean(record['runs'][s]['stable_s'] for s in seeds):.0f} s, EMA runs "
              f"{statistics.fmean(record['runs'][s]['ema_s'] for s in seeds):.0f} s (mean per seed); "
              f"{record['minutes']:.0f} min in all"]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--budgets", type=_ints, default=[100, 200, 300], help="budgets B (batches); the last is the run")
    p.add_argument("--windows", type=_windows, default=[(3, 1), (6, 1), (12, 1), (6, 2)],
                   help="K x N: K checkpoints every N-th, ending at B")  # fmt: skip
    p.add_argument("--decays", type=_floats, default=[0.1, 0.2], help="anneal lengths as fractions of B")
    p.add_argument("--avg-anneal-k", type=int, default=6)
    p.add_argument("--avg-anneal-decay", type=float, default=0.05)
    p.add_argument("--ema-half-life", type=int, default=10)
    p.add_argument("--seeds", type=int, nargs="+", default=[17, 18, 19])
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--eval-interval", type=int, default=100)
    p.add_argument("--save-interval", type=int, default=5)
    p.add_argument("--data", type=Path, help="the demo corpus (default: bench/_common.py's DEFAULT_DATA)")
    p.add_argument("--work", type=Path, help="folder for the runs (default: a temporary one, removed)")
    p.add_argument("--json", type=Path, help="write the record here")
    p.add_argument("--from-json", type=Path, help="report on a recorded run, training nothing")
    args = p.parse_args(argv)
    if args.from_json is not None:
        record = json.loads(args.from_json.read_text())
        print(report(record))
        return record
    for b in args.budgets:
        if b % args.eval_interval or b % args.save_interval:
            p.error(f"--budgets {b}: must be a multiple of --eval-interval and --save-interval")
    import _common

    data = _common.ensure_data(args.data or _common.DEFAULT_DATA)
    info = _common.machine_info()
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        work = args.work or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-average-")))
        work.mkdir(parents=True, exist_ok=True)
        runs = {str(seed): train_seed(data, args, seed, work) for seed in args.seeds}
    record = {
        "machine": info,
        "minutes": (time.perf_counter() - started) / 60,
        "seeds": args.seeds,
        "config": {k: getattr(args, k) for k in ("budgets", "windows", "decays", "avg_anneal_k", "avg_anneal_decay",
                                                  "ema_half_life", "warmup", "eval_interval", "save_interval")},
        "runs": runs,
    }  # fmt: skip
    print(report(record))
    if args.json:
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return record


if __name__ == "__main__":
    main()
