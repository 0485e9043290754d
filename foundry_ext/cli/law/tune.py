"""``foundry-ext law tune LAW.json CONFIG.yaml (--grid ... | --branch-from ...)``: candidates ranked by the law."""

from __future__ import annotations

import argparse
import time

from foundry_ext.cli import UsageError
from foundry_ext.cli.law.inputs import (
    MAX_BATCHES,
    NO_CUTS,
    PLATEAU,
    PLATEAU_CUT_KEYS,
    check_scheduler_name,
    law_notes,
    read_law,
    warn,
    yaml_lrs,
)

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Rank a grid of YAML keys, or cooldown branches of the YAML's stable run, by predicted final loss."""
    import sys

    from foundry_ext.config.errors import ConfigError
    from foundry_ext.law.tune import TuneError, combinations, parse_grid, rank, unresolved

    if bool(args.grid) == bool(args.branch_from):
        raise UsageError("give --grid KEY=V1,V2,... or --branch-from S1,... (with --end or --decay), one of them")
    law = read_law(args.law)
    plateau = check_scheduler_name(args.config, list(args.overrides)) == PLATEAU
    for spec in (args.grid or []) if plateau else []:
        key = spec.partition("=")[0].strip()
        if key.startswith("scheduler.") and key.removeprefix("scheduler.") in PLATEAU_CUT_KEYS:
            raise UsageError(
                f"--grid {key}: {PLATEAU}'s cuts come from the eval losses, which law tune does not have: every value "
                "predicts the same curve; tune the keys of its schedule (scheduler.t_warmup, max_duration, ...), or "
                "compare values with law predict --metrics"
            )
    started = time.perf_counter()
    try:
        if args.grid:
            grid = parse_grid(args.grid, args.config, list(args.overrides))
            combos = combinations(grid)
            rows = rank(law, lambda extra: yaml_lrs(args.config, [*args.overrides, *extra])[0], combos)
            kind = "combinations"
        else:
            rows = _branches(args, law)
            kind = "branches"
    except TuneError as e:
        raise UsageError(str(e)) from None
    except ConfigError as e:
        raise UsageError.of_config(e) from None
    law_notes(law, args.law)
    warned = sorted({w for c in rows for w in (c.warnings or [])})
    warn([f"{NO_CUTS}: ranked as such"] if plateau else [], args.strict)
    warn(warned, args.strict)
    print(f"{len(rows)} {kind} predicted in {time.perf_counter() - started:.2f}s ({law.form} law), best first:")
    for i, c in enumerate(rows, start=1):
        span = f"  [{c.low:.4f}, {c.high:.4f}]" if c.low is not None else ""
        print(f"  {i:>3}. {c.final:.4f}{span}  {' '.join(c.overrides)}")
    tied = unresolved(rows)
    if rows[0].low is None:
        print(f"best: {' '.join(rows[0].overrides)} (no band: the law was not checked on held-out runs)")
    elif tied:
        print(
            f"best: not resolvable: the bands of the first {tied + 1} overlap; the law's pick: "
            f"{' '.join(rows[0].overrides)}"
        )
    else:
        print(f"best: {' '.join(rows[0].overrides)}")
    if law.verdict is not None and law.verdict != "good":
        print(f"warning: the law's verdict is {law.verdict}: check the ranking on a run of your own", file=sys.stderr)
    return 0


def _branch_length(text: str, start: int, option: str) -> int:
    """``Nba``/``N`` batches, or ``Fdur``: the fraction F of the branched run ``start + LEN``, as anneal reads it."""
    from foundry_ext.config.durations import DurationError, dur_length

    t = text.strip()
    try:
        if t.endswith("dur"):
            f = float(t.removesuffix("dur"))
            if not 0 < f < 1:
                raise ValueError
            try:
                return dur_length(f, start)
            except DurationError as e:
                raise UsageError(f"{option} {text!r}: {e}") from None
        return int(t.removesuffix("ba"))
    except ValueError:
        raise UsageError(
            f"{option} {text!r}: expected batches (500ba) or a fraction of the branched run (0.2dur)"
        ) from None


def _branches(args: argparse.Namespace, law):
    import sys

    from foundry_ext.law.tune import MAX_CANDIDATES, branch_lr, rank
    from foundry_ext.schedules.wsd import DECAY_TYPES

    def ints(text: str, option: str) -> list[int]:
        items = [x.strip() for x in text.split(",")]
        try:
            values = [int(x.removesuffix("ba")) for x in items]
        except ValueError:
            raise UsageError(f"{option} {text!r}: expected batch counts, e.g. 2000,4000 or 2000ba") from None
        if any(v < 1 for v in values):
            raise UsageError(f"{option} {text!r}: every batch must be >= 1")
        return values

    starts = ints(args.branch_from, "--branch-from")
    shapes = [x.strip() for x in args.shape.split(",")]
    for shape in shapes:
        if shape not in DECAY_TYPES:
            raise UsageError(f"--shape {shape!r}: expected one of {', '.join(DECAY_TYPES)}")
    if not 0 <= args.floor < 1:
        raise UsageError(f"--floor {args.floor}: must be in [0, 1) (the decay's end as a fraction of the peak LR)")
    if (args.end is None) == (args.decay is None):
        raise UsageError("--branch-from needs --end B (every branch ends at B) or --decay LEN1,... (not both)")
    _, stable = yaml_lrs(args.config, list(args.overrides))
    total = stable.total
    plans: list[tuple[int, int, str]] = []
    if args.end is not None:
        (end,) = ints(args.end, "--end")
        for s in starts:
            if s >= end:
                raise UsageError(
                    f"--branch-from {s}: must be before --end {end} (the decay would be {end - s} batches)"
                )
            plans += [(s, end - s, shape) for shape in shapes]
    else:
        for s in starts:
            for text in args.decay.split(","):
                n = _branch_length(text, s, "--decay")
                if n < 1:
                    raise UsageError(f"--decay {text!r}: the decay must be at least 1 batch")
                plans += [(s, n, shape) for shape in shapes]
    for s, n, _ in plans:
        if s > total:
            raise UsageError(f"--branch-from {s}: after the YAML's run ends ({total} batches): raise max_duration")
        if s + n > MAX_BATCHES:
            raise UsageError(f"branch from {s} over {n} batches: longer than {MAX_BATCHES:,} batches")
    # a branch is a run of its own, from the stable run's checkpoint at s to s + n: past the YAML's max_duration it
    # is a longer run, not the same budget spent differently, and anneal refuses it (anneal/branch.py, _check_budget)
    past = [(s, n, shape) for s, n, shape in plans if s + n > total]
    if past:
        shown = ", ".join(f"from={s} decay={n}ba (ends at {s + n})" for s, n in dict.fromkeys(p[:2] for p in past))
        print(
            f"note: not ranked, past the YAML's max_duration ({total} batches), as anneal refuses them: {shown}",
            file=sys.stderr,
        )
        plans = [p for p in plans if p not in past]
    if len(plans) > MAX_CANDIDATES:
        raise UsageError(f"{len(plans)} branches; at most {MAX_CANDIDATES}")
    if len(plans) < 2:
        within = f" within max_duration ({total} batches)" if past else ""
        count = f"{len(plans)} branch{'es' if len(plans) != 1 else ''}{within}"
        raise UsageError(f"{count}, nothing to rank; give two or more branch points, lengths or shapes")
    labels = {f"from={s} decay={n}ba end={s + n} shape={shape}": (s, n, shape) for s, n, shape in plans}

    def lrs_of(label: list[str]):
        s, n, shape = labels[" ".join(label)]
        return branch_lr(stable, s, n, shape, args.floor)

    return rank(law, lrs_of, [label.split() for label in labels])
