"""The files ``lr-find`` writes: a PNG of the loss against the LR, a CSV of every point, a JSON summary."""

from __future__ import annotations

import csv
import json
import math
from typing import Any

from foundry_ext.lr_find.runner import LRFindResult

__all__ = ["render_png", "write_csv", "write_json"]


def write_csv(path: str, result: LRFindResult) -> None:
    """Rows ``batch,lr,loss,smoothed,read_lr`` for every batch run, floats written exactly (``repr``).

    ``lr`` is the LR the batch trained with; ``read_lr`` the LR its smoothed loss is read at by the rules (the
    lag-matched LR, or ``lr`` itself in the batch-LR reading).
    """
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["batch", "lr", "loss", "smoothed", "read_lr"])
        rows = zip(result.lrs, result.losses, result.smoothed, result.read_lrs, strict=True)
        for b, (lr, loss, s, read) in enumerate(rows):
            writer.writerow([b, repr(lr), repr(loss), repr(s), repr(read)])


def write_json(path: str, result: LRFindResult, yaml_lr: float | None) -> None:
    """:meth:`LRFindResult.to_json`, non-finite numbers written as ``null`` (JSON has no NaN)."""

    def clean(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return None
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    with open(path, "w") as f:
        json.dump(clean(result.to_json(yaml_lr)), f, indent=2)
        f.write("\n")


def _smoothed_at(result: LRFindResult, lr: float) -> float:
    """The smoothed loss at ``lr``, interpolated in log LR between recorded points (``minimum`` suggests lr / 10)."""
    import numpy as np

    points = [(math.log(x), s) for x, s in zip(result.read_lrs, result.smoothed, strict=True) if math.isfinite(s)]
    if not points:
        return math.nan
    xs, ys = zip(*points, strict=True)
    return float(np.interp(math.log(lr), xs, ys))


def render_png(path: str, result: LRFindResult, title: str, yaml_lr: float | None) -> tuple[int, int]:
    """Plot the raw and smoothed loss against the LR (log axis) and every rule's suggestion; return the image size.

    The used rule's line is solid, with a dot on the curve and its range shaded.
    """
    from foundry_ext.figures import pyplot, save_figure

    plt = pyplot()

    lrs, raw, smoothed = result.lrs, result.losses, result.smoothed
    fig, ax = plt.subplots(figsize=(10, 5.6), dpi=100)
    try:
        ax.plot(lrs, raw, color="tab:blue", alpha=0.35, linewidth=1.0, label="train loss (raw)")
        ax.plot(
            result.read_lrs,
            smoothed,
            color="tab:blue",
            linewidth=2.0,
            label=f"smoothed (EMA, beta {result.beta:g}; {result.reading} LRs)",
        )
        finite = [s for s in smoothed + raw if math.isfinite(s)]
        if finite:
            lo, start = min(finite), smoothed[0]
            top = max(start, min(max(finite), 2.0 * start)) if math.isfinite(start) else max(finite)
            pad = 0.05 * (top - lo or 1.0)
            ax.set_ylim(lo - pad, top + pad)
        i_min = result.min_loss_batch
        if i_min is not None:
            ax.plot(
                result.read_lrs[i_min],
                smoothed[i_min],
                "v",
                color="black",
                markersize=8,
                label=f"min smoothed loss at lr {result.read_lrs[i_min]:.2e}",
            )
        colors = {"valley": "tab:red", "minimum": "tab:orange", "steepest": "tab:green", "steepest_linear": "tab:gray"}
        for name, rule in result.suggestions.items():
            if rule.lr is None:
                continue
            used = name == result.rule
            ax.axvline(
                rule.lr,
                color=colors.get(name, "tab:purple"),
                linestyle="-" if used else ":",
                linewidth=2.2 if used else 1.2,
                label=f"{name}: {rule.lr:.2e}" + (" (suggested)" if used else ""),
            )
            if used and result.suggested_range is not None:
                low, high = result.suggested_range
                ax.axvspan(low, high, color=colors.get(name, "tab:purple"), alpha=0.08,
                           label=f"range {low:.3g} to {high:.3g} (docs/cli.md)")  # fmt: skip
            if used:
                ax.plot(
                    rule.lr,
                    _smoothed_at(result, rule.lr),
                    "o",
                    color=colors.get(name, "tab:purple"),
                    markersize=9,
                    zorder=5,
                )
        if yaml_lr is not None:
            ax.axvline(
                yaml_lr, color="black", linestyle="--", linewidth=1.0, label=f"the YAML's optimizer.lr {yaml_lr:g}"
            )
        ax.set_xscale("log")
        read = "lag-matched LRs" if result.reading == "lag-matched" else "its batch's LR"
        ax.set_xlabel(f"learning rate (raw loss: the LR its batch trained with; smoothed loss: {read})")
        ax.set_ylabel("train loss")
        ax.grid(True, which="both", alpha=0.25)
        stop = f"stopped early at batch {result.batches_run - 1}" if result.stopped_early else "no divergence"
        ax.set_title(
            f"{title}\nLR range test: {result.batches_run}/{result.batches} batches, lr {result.lr_min:g} -> "
            f"{result.lr_max:g}, {stop}",
            fontsize=10,
        )
        ax.legend(loc="best", fontsize=8, framealpha=0.85)
        width, height = save_figure(fig, path, fmt="png")
    finally:
        plt.close(fig)
    return width, height
