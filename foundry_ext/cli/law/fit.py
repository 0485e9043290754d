"""``foundry-ext law fit RUN... --out LAW.json``: the fit, its quality per run, the leave-one-run-out check."""

from __future__ import annotations

import argparse
import time

from foundry_ext.cli import UsageError, check_output_paths

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Fit the law on the runs, check it leaving each run out, print its quality and write LAW.json."""
    from foundry_ext.law.fit import FitError, fit
    from foundry_ext.law.lawfile import write_law
    from foundry_ext.law.reliability import check, domain_of
    from foundry_ext.law.runs import RunError, read_runs

    if args.warmup is not None and args.warmup < 0:
        raise UsageError(f"--warmup {args.warmup}: must be >= 0")
    check_output_paths(("--out", args.out))
    try:
        traces = read_runs(args.runs, args.metric, args.warmup)
        result = fit(traces, args.law_form)
    except (RunError, FitError) as e:
        raise UsageError(str(e)) from None
    print(f"{result.form} law fitted on {len(traces)} runs in {result.seconds:.2f}s ({result.starts} starting points)")
    print("  " + ", ".join(f"{k} {v:.6g}" for k, v in result.params.items()))
    print(f"  {'run':<28} {'losses':>6} {'warmup':>7} {'R^2':>8} {'mean rel':>9} {'worst rel':>9}")
    for q, tr in zip(result.runs, traces, strict=True):
        print(f"  {q.name:<28} {q.points:>6} {tr.warmup:>7} {q.r2:>8.5f} {q.mean_rel:>9.4%} {q.worst_rel:>9.4%}")
    started = time.perf_counter()
    reliability = check(traces, result)
    if reliability.checks:
        took = time.perf_counter() - started
        print(f"leave-one-run-out (the law refitted without each run predicts it; {took:.1f}s):")
        print(f"  {'run left out':<28} {'mean rel':>9} {'worst rel':>9} {'final rel':>9}")
        for c in reliability.checks:
            if c.checkable:
                final = "-" if c.final_rel is None else f"{c.final_rel:.4%}"
                print(f"  {c.name:<28} {c.mean_rel:>9.4%} {c.worst_rel:>9.4%} {final:>9}")
            else:
                print(f"  {c.name:<28} not checkable: {c.reason}")
    write_law(args.out, result, list(args.runs), reliability, domain_of(traces))
    print(f"verdict: {reliability.verdict} ({reliability.reason})")
    print(f"wrote {args.out}")
    return 0
