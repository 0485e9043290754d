"""Training throughput of the tiny MPT with three schedulers, and the collectives the plateau adds.

Run: ``.venv/bin/python bench/bench_training.py`` (about 5 minutes with ``--collectives``; ``--quick`` to smoke).

1. Throughput. ``yamls/tiny-wsd.yaml`` on the demo corpus, trained through ``train.py`` in this process with
   llm-foundry's ``cosine_with_warmup``, foundry-ext's ``warmup_stable_decay`` and ``reduce_lr_on_plateau`` (same
   ``eval_interval``, same seed, so the same batches and evaluations), interleaved A B C A B C ... for ``--rounds``
   rounds. A run's throughput is (batches after the first ``--skip``) / (wall-clock from the end of batch ``--skip``
   to the end of ``fit``), evaluations included, start-up (imports, model build, data loader) excluded. The report
   is each scheduler's median batches/s and the median over rounds of its slowdown relative to ``cosine_with_warmup``
   in the same round (1.00x = as fast; above 1 = slower).
2. ``--collectives``: two 2-process gloo runs under the Composer launcher (``composer -n 2
   bench/count_collectives.py``), ``reduce_lr_on_plateau`` and ``cosine_with_warmup``, counting every
   ``torch.distributed`` collective per Composer event and per rank; prints the difference.

torch runs on one thread (``torch.set_num_threads(1)``) in every run: on a shared 2-core machine two threads per
process contend with other processes and make the timing several times slower and much noisier.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common

COMPARED = ("cosine_with_warmup", "warmup_stable_decay", "reduce_lr_on_plateau")
TARGET = 1.02  # at most 2% slower than cosine_with_warmup

# Events that belong to a training batch (a collective attributed to one of them runs once per batch).
TRAIN_EVENTS = {
    "before_dataloader",
    "after_dataloader",
    "batch_start",
    "before_train_batch",
    "before_forward",
    "after_forward",
    "before_loss",
    "after_loss",
    "before_backward",
    "after_backward",
    "after_train_batch",
    "batch_end",
    "batch_checkpoint",
}


def throughput(recorder: _common.Recorder, skip: int) -> float:
    ends = recorder.batch_end
    return (len(ends) - skip) / (recorder.fit_end - ends[skip - 1])


def bench_throughput(
    data: Path, rounds: int, batches: int, eval_interval: int, skip: int, t_warmup: str = "20ba"
) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    rates: dict[str, list[float]] = {name: [] for name in COMPARED}
    slowdown: dict[str, list[float]] = {name: [] for name in COMPARED}
    evals: dict[str, int] = {}
    share: dict[str, list[float]] = {name: [] for name in COMPARED}  # schedule time / fit time
    per_batch_us: dict[str, list[float]] = {name: [] for name in COMPARED}
    for r in range(rounds):
        for name in COMPARED:
            cfg = _common.make_config(
                data,
                _common.SCHEDULERS[name],
                t_warmup=t_warmup,
                max_duration=f"{batches}ba",
                eval_interval=f"{eval_interval}ba",
            )
            rec = _common.run(cfg)
            rates[name].append(throughput(rec, skip))
            evals[name] = len(rec.evals)
            share[name].append(rec.schedule_seconds / (rec.fit_end - rec.fit_start))
            per_batch_us[name].append(rec.schedule_seconds / len(rec.batch_end) * 1e6)
        for name in COMPARED:
            slowdown[name].append(rates["cosine_with_warmup"][-1] / rates[name][-1])
        line = ", ".join(f"{n} {rates[n][-1]:.2f}" for n in COMPARED)
        print(f"round {r + 1}/{rounds}: batches/s {line}", file=sys.stderr, flush=True)
    return {"rates": rates, "slowdown": slowdown, "evals": evals, "share": share, "per_batch_us": per_batch_us}


def report_throughput(result: dict[str, Any], args: argparse.Namespace) -> str:
    lines = [
        f"{args.rounds} rounds (A B C interleaved), {args.batches} batches per run, eval every {args.eval_interval} "
        f"batches (4 eval batches each), throughput measured after batch {args.skip}, torch on 1 thread.",
        "",
        "| scheduler | evals per run | batches/s (median) | min-max | slowdown vs cosine_with_warmup (median of "
        "per-round ratios) | min-max | target | met | schedule µs per batch | schedule share of fit time |",
        "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|",
    ]
    for name in COMPARED:
        rates, slow = result["rates"][name], result["slowdown"][name]
        med = statistics.median(slow)
        met = "-" if name == "cosine_with_warmup" else ("yes" if med <= TARGET else "**NO**")
        lines.append(
            f"| {name} | {result['evals'][name]} | {statistics.median(rates):.2f} | {min(rates):.2f}-{max(rates):.2f}"
            f" | {med:.3f}x | {min(slow):.3f}-{max(slow):.3f} | <= {TARGET}x | {met} | "
            f"{statistics.median(result['per_batch_us'][name]):.1f} | {statistics.median(result['share'][name]):.4%} |"
        )
    lines += [
        "",
        "Schedule µs per batch: time inside the LR scheduler's step() (which evaluates the multiplier) plus the "
        "plateau adapter's callback events, measured inside each run and divided by its batches (median over "
        "rounds); the share is that time over the whole fit time: the schedule's entire cost, free of the machine's "
        "noise.",
    ]
    return "\n".join(lines)


def run_collectives(name: str, out_dir: Path, overrides: list[str], data: Path) -> list[dict[str, Any]]:
    """One 2-process run of ``count_collectives.py`` with scheduler ``name``; the per-rank results."""
    composer = Path(sys.executable).with_name("composer")
    out = out_dir / f"{name}.json"
    cmd = [str(composer), "-n", "2", str(Path(__file__).with_name("count_collectives.py")), name, str(out), *overrides]
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "FOUNDRY_EXT_BENCH_DATA": str(data)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return [json.loads(Path(f"{out}.rank{rank}").read_text()) for rank in range(2)]


def bench_collectives(batches: int, eval_interval: int, data: Path) -> dict[str, list[dict[str, Any]]]:
    overrides = [f"max_duration={batches}ba", f"eval_interval={eval_interval}ba"]
    with tempfile.TemporaryDirectory() as tmp:
        names = ("reduce_lr_on_plateau", "cosine_with_warmup")
        return {name: run_collectives(name, Path(tmp), overrides, data) for name in names}


def _by_phase(result: dict[str, Any]) -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = collections.Counter()
    for row in result["counts"]:
        counts[(row["event"], row["op"])] += row["n"]
    return counts


def report_collectives(results: dict[str, list[dict[str, Any]]]) -> str:
    plateau, cosine = results["reduce_lr_on_plateau"], results["cosine_with_warmup"]
    lines = [
        f"2 processes (gloo, CPU), {plateau[0]['batches']} batches, {plateau[0]['evals']} evaluations. "
        "Collectives per rank that differ between the runs (event = Composer event last run before the call):",
        "",
        "| rank | event | collective | reduce_lr_on_plateau | cosine_with_warmup | difference |",
        "|---:|---|---|---:|---:|---:|",
    ]
    summary = []
    for p, c in zip(plateau, cosine, strict=True):
        pc, cc = _by_phase(p), _by_phase(c)
        diff = {k: pc.get(k, 0) - cc.get(k, 0) for k in set(pc) | set(cc)}
        for (event, op), d in sorted(diff.items()):
            if d:
                lines.append(
                    f"| {p['rank']} | {event} | {op} | {pc.get((event, op), 0)} | {cc.get((event, op), 0)} | {d:+d} |"
                )
        train_extra = sum(d for (event, _), d in diff.items() if event in TRAIN_EVENTS)
        total_p, total_c = sum(pc.values()), sum(cc.values())
        summary.append(
            f"rank {p['rank']}: {total_p} collectives with the plateau, {total_c} without; extra broadcasts after "
            f"evaluation: {diff.get(('eval_after_all', 'broadcast'), 0)} for {p['evals']} evaluations; extra "
            f"collectives in training-batch events: {train_extra} over {p['batches']} batches."
        )
    if len(lines) == 4:
        lines.append("| - | (none) | | | | |")
    return "\n".join([*lines, "", *summary])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="A B C rounds (default 5)")
    parser.add_argument("--batches", type=int, default=80, help="batches per run (default 80)")
    parser.add_argument("--eval-interval", type=int, default=20, help="batches between evaluations (default 20)")
    parser.add_argument("--skip", type=int, default=10, help="batches excluded at the start (default 10)")
    parser.add_argument("--collectives", action="store_true", help="also count collectives in 2-process runs")
    parser.add_argument("--collective-batches", type=int, default=40, help="batches of the 2-process runs")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 round of 6 batches")
    parser.add_argument("--data", type=Path, default=_common.DEFAULT_DATA, help="demo data folder (made if absent)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.batches, args.eval_interval, args.skip = 1, 6, 3, 2
    data = _common.ensure_data(args.data)
    start = time.perf_counter()
    warmup = "2ba" if args.quick else "20ba"
    result = bench_throughput(data, args.rounds, args.batches, args.eval_interval, args.skip, warmup)
    print(report_throughput(result, args))
    if args.collectives:
        print()
        print(report_collectives(bench_collectives(args.collective_batches, args.eval_interval, data)))
    print(f"\n(wall-clock {time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
