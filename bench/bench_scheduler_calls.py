"""Microseconds per multiplier call of every foundry-ext scheduler, as a ratio to Composer's own cosine-with-warmup.

Run: ``.venv/bin/python bench/bench_scheduler_calls.py`` (about 1-2 minutes; ``--quick`` for a smoke run).

Every scheduler is called on the same real ``composer.core.State`` (``max_duration='100000ba'``), whose timestamp is
set to a realistic batch before each call. The baseline is ``composer.optim.CosineAnnealingWithWarmupScheduler(
t_warmup='100ba')``, with the string durations users write (Composer re-parses them on every call).

Method: each round picks a window of ``--calls`` consecutive batches at a different place in the run (warmup,
stable and decay phases are all visited). For each candidate, in a rotating order, the baseline and the candidate are
timed back to back on the same window (A B, A C, ...); the ratio of the round is candidate / baseline. The report is
the median over rounds of per-call time and of the ratio. Before each timed window both schedulers are called once,
untimed, at the batch just before it, so stateful schedulers (``torch_lr_scheduler``) see consecutive batches: that
is the per-batch cost amortised, as in training. The loop overhead (setting the timestamp and an empty call) is
measured the same way and subtracted from both sides.

A second table times ``torch_lr_scheduler`` resuming straight at batch 1,000,000: a fresh scheduler's first call
there (what a resumed run does), best of a few tries.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from composer import optim as composer_optim
from composer.core import State, Time, Timestamp
from composer.devices import DeviceCPU

from foundry_ext.schedules.wsd import DECAY_TYPES
from foundry_ext.trainer.composer_schedulers import COMPOSER_SCHEDULERS
from foundry_ext.trainer.plateau.scheduler import ReduceLROnPlateauScheduler
from foundry_ext.trainer.schedulers import (
    InverseSqrtScheduler,
    PowerScheduler,
    StagesScheduler,
    WarmupStableDecayScheduler,
    WSDPeriodsScheduler,
)
from foundry_ext.trainer.torch_lr import TorchLRScheduler

MAX_BATCHES = 100_000
RESUME_BATCH = 1_000_000

# Targets from the brief: candidate / baseline must be at most this.
TARGET = {"wsd": 1.0, "olmo": 1.0, "composer": 1.0, "plateau": 1.2, "torch": 2.0}
RESUME_TARGET_S = 2.0

# Composer's schedulers as users write them in YAML: string durations (our wrappers parse them once at build).
COMPOSER_KWARGS: dict[str, dict[str, Any]] = {
    "step": {"step_size": "1000ba", "gamma": 0.5},
    "multistep": {"milestones": ["30000ba", "60000ba", "90000ba"], "gamma": 0.5},
    "multistep_with_warmup": {"t_warmup": "100ba", "milestones": ["30000ba", "60000ba"], "gamma": 0.5},
    "constant": {"alpha": 1.0, "t_max": "1dur"},
    "linear": {"alpha_i": 1.0, "alpha_f": 0.1, "t_max": "1dur"},
    "exponential": {"gamma": 0.5, "decay_period": "10000ba"},
    "cosine": {"t_max": "1dur", "alpha_f": 0.1},
    "cosine_with_restarts": {"t_0": "10000ba", "t_mult": 2.0, "alpha_f": 0.1},
    "polynomial": {"power": 2.0, "t_max": "1dur", "alpha_f": 0.1},
    "polynomial_with_warmup": {"t_warmup": "100ba", "power": 2.0, "t_max": "1dur", "alpha_f": 0.1},
}

# torch_lr_scheduler configs: (label, kwargs). The first few are timed per call; all are timed on resume.
TORCH_CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("StepLR", {"type": "StepLR", "step_size": 1000, "gamma": 0.5}),
    ("MultiStepLR", {"type": "MultiStepLR", "milestones": [30000, 60000, 90000], "gamma": 0.5}),
    ("CosineAnnealingLR", {"type": "CosineAnnealingLR", "T_max": MAX_BATCHES, "eta_min": 0.1}),
    ("OneCycleLR", {"type": "OneCycleLR", "max_lr": 1.0, "total_steps": 2 * RESUME_BATCH}),
    ("CosineAnnealingWarmRestarts", {"type": "CosineAnnealingWarmRestarts", "T_0": 10000, "T_mult": 2}),
    (
        "SequentialLR",
        {
            "type": "SequentialLR",
            "schedulers": [
                {"type": "LinearLR", "start_factor": 0.01, "total_iters": 100},
                {"type": "CosineAnnealingLR", "T_max": MAX_BATCHES - 100},
            ],
            "milestones": [100],
        },
    ),
    ("ExponentialLR", {"type": "ExponentialLR", "gamma": 0.99999}),
    ("LinearLR", {"type": "LinearLR", "start_factor": 0.1, "total_iters": 1000}),
    ("ConstantLR", {"type": "ConstantLR", "factor": 0.5, "total_iters": 1000}),
    ("PolynomialLR", {"type": "PolynomialLR", "total_iters": 2 * RESUME_BATCH, "power": 2.0}),
    ("CyclicLR", {"type": "CyclicLR", "base_lr": 0.1, "max_lr": 1.0, "step_size_up": 2000, "cycle_momentum": False}),
    (
        "ChainedScheduler",
        {
            "type": "ChainedScheduler",
            "schedulers": [
                {"type": "LinearLR", "start_factor": 0.01, "total_iters": 100},
                {"type": "ExponentialLR", "gamma": 0.99999},
            ],
        },
    ),
    (
        "ChainedScheduler+cosine",  # cosine inside a chain past T_max: no closed form, torch's recursion replayed
        {
            "type": "ChainedScheduler",
            "schedulers": [
                {"type": "LinearLR", "start_factor": 0.01, "total_iters": 100},
                {"type": "CosineAnnealingLR", "T_max": MAX_BATCHES},
            ],
        },
    ),
    (
        "ChainedScheduler+CyclicLR",  # a child that ignores its input LR: only step t itself is computed
        {
            "type": "ChainedScheduler",
            "schedulers": [
                {"type": "CyclicLR", "base_lr": 0.1, "max_lr": 1.0, "step_size_up": 2000, "cycle_momentum": False},
                {"type": "ExponentialLR", "gamma": 0.99999},
            ],
        },
    ),
]
TORCH_PER_CALL = (
    "StepLR",
    "MultiStepLR",
    "CosineAnnealingLR",
    "OneCycleLR",
    "CosineAnnealingWarmRestarts",
    "SequentialLR",
)


def make_state(max_duration: str = f"{MAX_BATCHES}ba") -> State:
    """A real Composer State, as the Trainer holds it: one model, one optimizer, a batch-based max_duration."""
    model = torch.nn.Linear(1, 1)
    return State(
        model=model,
        rank_zero_seed=0,
        run_name="b",
        device=DeviceCPU(),
        max_duration=max_duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=1.0),
        dataloader_len=1000,
    )


def timestamps(start: int, n: int, batch_size: int = 16, seq_len: int = 128) -> list[Timestamp]:
    """Timestamps of ``n`` consecutive batches, as the Trainer makes them (1000 batches per epoch)."""
    return [
        Timestamp(
            epoch=Time(b // 1000, "ep"),
            batch=Time(b, "ba"),
            sample=Time(b * batch_size, "sp"),
            token=Time(b * batch_size * seq_len, "tok"),
            batch_in_epoch=Time(b % 1000, "ba"),
        )
        for b in range(start, start + n)
    ]


def candidates() -> list[tuple[str, str, Callable[[], Any], Callable[[], Any] | None]]:
    """(group, label, factory, own Composer parent or None): every scheduler of the package, built as YAML does."""
    out: list[tuple[str, str, Callable[[], Any], Callable[[], Any] | None]] = []
    for decay in DECAY_TYPES:
        out.append(
            (
                "wsd",
                f"warmup_stable_decay ({decay})",
                lambda d=decay: WarmupStableDecayScheduler(t_warmup="100ba", t_decay="0.2dur", decay_type=d),
                None,
            )
        )
    # OLMo-core's schedules, configured as the yamls/tiny-*.yaml examples, stretched to the 100,000-batch run
    olmo: list[tuple[str, Callable[[], Any]]] = [
        ("inverse_sqrt", lambda: InverseSqrtScheduler(t_warmup="100ba", alpha_i=0.1, alpha_f=0.05)),
        ("power", lambda: PowerScheduler(t_warmup="100ba", b=-0.51, t_decay="0.1dur")),
        (
            "wsd_periods",
            lambda: WSDPeriodsScheduler(
                periods=["40000ba", "30000ba", "30000ba"], peaks=[1.0, 0.8, 0.8], t_warmup="100ba",
                t_decay="5000ba", decay_type="sqrt", alpha_f=0.1,
            ),
        ),
        (
            "stages",
            lambda: StagesScheduler(
                stages=[{"duration": "100ba", "start": 0.0, "end": 1.0},
                        {"duration": "99900ba", "shape": "cosine", "end": 0.1}],
                override_decay={"start": "80000ba", "duration": "20000ba", "end": 0.0},
            ),
        ),
    ]  # fmt: skip
    out += [("olmo", label, factory, None) for label, factory in olmo]
    for name, (ours, theirs) in COMPOSER_SCHEDULERS.items():
        kwargs = COMPOSER_KWARGS[name]
        out.append(("composer", name, lambda c=ours, k=kwargs: c(**k), lambda c=theirs, k=kwargs: c(**k)))
    for label, kwargs in TORCH_CONFIGS:
        if label in TORCH_PER_CALL:
            out.append(("torch", f"torch_lr_scheduler ({label})", lambda k=kwargs: TorchLRScheduler(**k), None))
    out.append(("plateau", "reduce_lr_on_plateau", lambda: ReduceLROnPlateauScheduler(), None))
    out.append(
        (
            "plateau",
            "reduce_lr_on_plateau (base: WSD)",
            lambda: ReduceLROnPlateauScheduler(base={"name": "warmup_stable_decay", "t_warmup": "100ba"}),
            None,
        )
    )
    return out


def _time_window(fn: Any, state: State, window: list[Timestamp]) -> float:
    """Seconds for calling ``fn(state)`` once per timestamp of ``window`` (timestamp assignment included)."""
    clock = time.perf_counter
    start = clock()
    for ts in window:
        state.timestamp = ts
        fn(state)
    return clock() - start


def _noop(state: State, ssr: float = 1.0) -> float:
    return 1.0


def _window_starts(rounds: int, calls: int, seed: int = 0) -> list[int]:
    """One window per round, spread evenly over the run (warmup, stable, decay), in a shuffled order."""
    span = MAX_BATCHES - calls - 1
    starts = [1 + (span * r) // max(rounds - 1, 1) for r in range(rounds)]
    starts[0] = 1  # the warmup (first 100 batches) is in one window
    random.Random(seed).shuffle(starts)
    return starts


def bench_calls(rounds: int, calls: int) -> list[dict[str, Any]]:
    """Median µs per call and median ratio to the baseline for every candidate."""
    state = make_state()
    baseline = composer_optim.CosineAnnealingWithWarmupScheduler(t_warmup="100ba")
    cands = candidates()
    built = {label: factory() for _, label, factory, _ in cands}
    parents = {label: parent() for _, label, _, parent in cands if parent is not None}
    # A plateau scheduler attaches its callback to the state on its first call, and a state holds at most one:
    # each gets its own State, built the same way. Every first call happens before timing.
    states = {label: make_state() if group == "plateau" else state for group, label, _, _ in cands}
    first = timestamps(0, 1)[0]
    for fn, st in [(baseline, state), *((built[k], states[k]) for k in built), *((p, state) for p in parents.values())]:
        st.timestamp = first
        fn(st)

    per_call: dict[str, list[float]] = {label: [] for label in [*built, *(f"{k} [composer]" for k in parents)]}
    ratios: dict[str, list[float]] = {label: [] for label in built}
    parent_ratios: dict[str, list[float]] = {label: [] for label in parents}
    base_us: list[float] = []
    overhead_us: list[float] = []

    def timed(fn: Any, window: list[Timestamp], prev: Timestamp, st: State = state) -> float:
        st.timestamp = prev  # untimed call at the batch before the window: consecutive batches
        fn(st)
        return _time_window(fn, st, window) / len(window) * 1e6

    for r, start in enumerate(_window_starts(rounds, calls)):
        window = timestamps(start, calls)
        prev = timestamps(start - 1, 1)[0]
        order = list(built)
        order = order[r % len(order) :] + order[: r % len(order)]  # rotate: no candidate always runs first
        for label in order:
            fn = built[label]
            overhead = timed(_noop, window, prev)
            base = timed(baseline, window, prev) - overhead
            ours = timed(fn, window, prev, states[label]) - overhead
            overhead_us.append(overhead)
            base_us.append(base)
            per_call[label].append(ours)
            ratios[label].append(ours / base)
            if label in parents:
                theirs = timed(parents[label], window, prev) - overhead
                per_call[f"{label} [composer]"].append(theirs)
                parent_ratios[label].append(ours / theirs)
        print(f"round {r + 1}/{rounds} (batches {start}..{start + calls - 1}) done", file=sys.stderr, flush=True)

    rows = []
    for group, label, _, _ in cands:
        rows.append(
            {
                "group": group,
                "label": label,
                "us": statistics.median(per_call[label]),
                "ratio": statistics.median(ratios[label]),
                "ratio_min": min(ratios[label]),
                "ratio_max": max(ratios[label]),
                "parent_us": statistics.median(per_call[f"{label} [composer]"]) if label in parents else None,
                "parent_ratio": statistics.median(parent_ratios[label]) if label in parents else None,
                "target": TARGET[group],
            }
        )
    rows.append(
        {
            "group": "baseline",
            "label": "composer CosineAnnealingWithWarmupScheduler(t_warmup='100ba')",
            "us": statistics.median(base_us),
            "overhead_us": statistics.median(overhead_us),
        }
    )
    return rows


def bench_resume(repeats: int, batch: int = RESUME_BATCH, only: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
    """Seconds for a fresh ``torch_lr_scheduler``'s first call at ``batch`` (a resumed run), best of ``repeats``."""
    state = make_state(max_duration=f"{2 * batch}ba")
    state.timestamp = timestamps(batch, 1)[0]
    rows = []
    for label, kwargs in TORCH_CONFIGS:
        if only is not None and label not in only:
            continue
        times = []
        for _ in range(repeats):
            sched = TorchLRScheduler(**kwargs)
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                value = sched(state)
            times.append(time.perf_counter() - start)
        rows.append({"label": label, "seconds": min(times), "value": value, "ok": min(times) < RESUME_TARGET_S})
    return rows


def report(rows: list[dict[str, Any]], resume: list[dict[str, Any]], args: argparse.Namespace) -> str:
    base = rows[-1]
    lines = [
        f"Baseline: {base['label']}: {base['us']:.2f} µs/call (loop overhead {base['overhead_us']:.2f} µs/call, "
        f"subtracted everywhere); {args.rounds} rounds x {args.calls} consecutive batches, max_duration "
        f"{MAX_BATCHES}ba.",
        "",
        "| scheduler | µs/call | ratio to baseline (median) | min-max over rounds | target | met | "
        "own Composer class µs/call | ratio to own Composer class |",
        "|---|---:|---:|---:|---:|---|---:|---:|",
    ]
    for row in rows[:-1]:
        met = "yes" if row["ratio"] <= row["target"] else "**NO**"
        parent = f"{row['parent_us']:.2f} | {row['parent_ratio']:.2f}x" if row["parent_us"] is not None else "- | -"
        lines.append(
            f"| {row['label']} | {row['us']:.2f} | {row['ratio']:.2f}x | {row['ratio_min']:.2f}-"
            f"{row['ratio_max']:.2f} | <= {row['target']:.1f}x | {met} | {parent} |"
        )
    if resume:
        lines += [
            "",
            f"torch_lr_scheduler resuming at batch {resume[0].get('batch', RESUME_BATCH):,}: a fresh scheduler's "
            f"first call, best of {args.resume_repeats} (target < {RESUME_TARGET_S:g} s).",
            "",
            "| torch class | seconds | multiplier there | met |",
            "|---|---:|---:|---|",
        ]
        for row in resume:
            lines.append(
                f"| {row['label']} | {row['seconds']:.4f} | {row['value']:.6g} | {'yes' if row['ok'] else '**NO**'} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="rounds (windows); median over these (default 15)")
    parser.add_argument("--calls", type=int, default=1000, help="consecutive batches per window (default 1000)")
    parser.add_argument("--resume-repeats", type=int, default=3, help="tries per class for the resume test")
    parser.add_argument("--quick", action="store_true", help="smoke run: 2 rounds of 50 calls, resume at 20,000")
    args = parser.parse_args(argv)
    resume_batch = RESUME_BATCH
    if args.quick:
        args.rounds, args.calls, args.resume_repeats = 2, 50, 1
        resume_batch = 20_000
    rows = bench_calls(args.rounds, args.calls)
    resume = bench_resume(args.resume_repeats, resume_batch)
    for row in resume:
        row["batch"] = resume_batch
    print(report(rows, resume, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
