"""The text side of ``foundry-ext plot``: the batches to evaluate, a character chart of the LR, the plateau report.

No I/O: each function returns the lines; the command prints them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from foundry_ext.preview.pipeline import LRPipeline
    from foundry_ext.preview.schedule import Mark

__all__ = [
    "CHART_HEIGHT",
    "CHART_WIDTH",
    "lr_text",
    "plateau_lines",
    "plateau_report",
    "report",
    "sample_batches",
    "text_chart",
]

CHART_WIDTH = 60
CHART_HEIGHT = 12


def sample_batches(total: int, points: int, exact: Iterable[int] = ()) -> list[int]:
    """About ``points`` evenly spaced batches in ``[0, total - 1]``, plus each of ``exact`` and its neighbours."""
    last = total - 1
    step = max(1, last // max(1, points - 1))
    chosen = set(range(0, last + 1, step))
    chosen.add(last)
    for b in exact:
        chosen.update(x for x in (b - 1, b, b + 1) if 0 <= x <= last)
    return sorted(chosen)


def lr_text(p: LRPipeline) -> str:
    """``lr=0.0006``, or what the values are when the YAML sets no LR."""
    return "the multiplier (optimizer.lr is not set)" if p.lr is None else f"lr={p.lr:g}"


def report(p: LRPipeline, xs: Sequence[int], lrs: np.ndarray, marks: Sequence[Mark]) -> list[str]:
    """What ``plot`` prints about a schedule: its keys, the chart, the extremes, marks, notes, warnings, plateau."""
    from foundry_ext.config.train_yaml import summarize

    params = summarize({k: v for k, v in p.block.items() if k != "name"})
    lines = [f"{p.name} ({params or 'defaults'}); {lr_text(p)}, max_duration={p.clock.max_duration} = batches 0 to "
             f"{p.total - 1}"]  # fmt: skip
    lines += text_chart(xs, lrs.tolist(), p.total, [(m.label, m.batch) for m in marks])
    i_max, i_min = int(lrs.argmax()), int(lrs.argmin())
    lines.append(
        f"LR max {lrs[i_max]:.4g} at batch {xs[i_max]}, min {lrs[i_min]:.4g} at batch {xs[i_min]} (the LR each batch "
        f"trains with, exact at {len(xs)} batches: evenly spaced, plus every mark and its neighbours)"
    )
    if marks:
        # the batch first trained at each, one after the mark's timestamp: said, or t_warmup=20ba reads as off by one
        lines.append(
            "marks: " + ", ".join(f"{m.label} at batch {m.batch}" for m in marks) + " (the first batch trained at "
            "each: Composer steps the LR at the end of a batch, so a change at timestamp T first trains batch T+1)"
        )
    lines += [*p.clock.notes, *(f"warning: {w}" for w in p.warnings)]
    return lines + (plateau_report(p) if p.plateau else [])


def plateau_report(pipeline: LRPipeline) -> list[str]:
    """The plateau rule's settings and each simulated cut, one line each (``reduce_lr_on_plateau`` only)."""
    schedule: Any = pipeline.schedule
    return plateau_lines(
        schedule.model.monitor, schedule.rule, pipeline.metrics, pipeline.cuts, pipeline.base_lr, pipeline.skipped,
        pipeline.ignored,
    )  # fmt: skip


def plateau_lines(
    monitor: str,
    rule: Any,
    metrics: Sequence[tuple[int, float]] | None,
    cuts: Sequence[Any],
    base_lr: float,
    skipped: int,
    ignored: int,
    factor_of: Callable[[int], float] = lambda batch: 1.0,
) -> list[str]:
    """:func:`plateau_report`'s lines from their parts (a ramp's replay has no pipeline); ``metrics`` None: none.

    A cut's LRs are ``base_lr * scale * factor_of(batch)``: a ramp's stage factor at the cut's batch (1 without one).
    """
    lines = []
    lines.append(
        f"plateau: monitor {monitor} ({rule.mode}), factor {rule.factor:g}, patience {rule.patience}, "
        f"threshold {rule.threshold:g} ({rule.threshold_mode}), cooldown {rule.cooldown}"
    )
    if metrics is None:
        lines.append(
            "plateau: drawn without cuts (the time part base x warmup); pass --metrics FILE.csv to simulate cuts"
        )
        return lines
    extra = f", {skipped} in warmup (not counted, as in training)" if skipped else ""
    extra += f", {ignored} at or after the end of the run ignored" if ignored else ""
    lines.append(
        f"plateau: simulated {len(metrics)} evaluations{extra}: {len(cuts)} cut{'s' if len(cuts) != 1 else ''}"
    )
    for c in cuts:
        cut = c.cut
        lines.append(
            f"  cut at the evaluation after batch {c.batch - 1} (timestamp {c.batch}), from batch {c.batch} on: scale "
            f"{cut.old_scale:g} -> {cut.new_scale:g} (lr {base_lr * cut.old_scale * factor_of(c.batch):.4g} -> "
            f"{base_lr * cut.new_scale * factor_of(c.batch):.4g}); value {cut.value:.6g} vs best {cut.best:.6g}, "
            f"{cut.evals_waited} evaluations without improvement"
        )
    return lines


def text_chart(
    xs: Sequence[int],
    ys: Sequence[float],
    total: int,
    bounds: Sequence[tuple[str, int]] = (),
    width: int = CHART_WIDTH,
    height: int = CHART_HEIGHT,
) -> list[str]:
    """A ``width x height`` character chart of ``ys`` against batches ``xs`` (``0 .. total - 1``); marks ``|``.

    Each column covers ``total / width`` batches and marks every row between the lowest and the highest value
    evaluated in it, so a cliff shows as a vertical stroke rather than a gap.
    """
    lo, hi = min(ys), max(ys)
    span = hi - lo

    def row(v: float) -> int:
        return 0 if span <= 0 else round((v - lo) / span * (height - 1))

    def column(batch: int) -> int:
        return min(width - 1, batch * width // max(total, 1))

    cols: list[tuple[int, int] | None] = [None] * width
    for x, y in zip(xs, ys, strict=True):
        c, r = column(x), row(y)
        cur = cols[c]
        cols[c] = (r, r) if cur is None else (min(cur[0], r), max(cur[1], r))
    grid = [[" "] * width for _ in range(height)]
    for c, rows in enumerate(cols):
        if rows is not None:
            for r in range(rows[0], rows[1] + 1):
                grid[height - 1 - r][c] = "*"
    top, bottom = f"{hi:.3g}", f"{lo:.3g}"
    pad = max(len(top), len(bottom))
    lines = []
    for i, cells in enumerate(grid):
        label = top if i == 0 else bottom if i == height - 1 else ""
        lines.append(f"{label:>{pad}} |{''.join(cells)}")
    axis = ["-"] * width
    for _, b in bounds:
        axis[column(b)] = "|"
    lines.append(f"{'':>{pad}} +{''.join(axis)}")
    end = f"batch {total - 1}"
    lines.append(f"{'':>{pad}}  0{end:>{width - 1}}")
    return lines
