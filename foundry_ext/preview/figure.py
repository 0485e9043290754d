"""The PNG of ``foundry-ext plot``: the LR of the evaluated batches, its marks, plateau cuts, metric and law curve."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

    from foundry_ext.preview.pipeline import LRPipeline

__all__ = ["draw", "human", "render_png"]


def draw(
    path: str,
    p: LRPipeline,
    xs: Sequence[int],
    lrs: np.ndarray,
    time_lrs: np.ndarray | None,
    marks: Sequence[Any],
    loss_curve: tuple[list[int], list[float]] | None = None,
) -> tuple[int, int]:
    """:func:`render_png` of a pipeline's LRs at ``xs``, titled with its scheduler block and run length."""
    from foundry_ext.config.train_yaml import summarize
    from foundry_ext.preview.chart import lr_text

    full = summarize({k: v for k, v in p.block.items() if k != "name"}, limit=280)
    return render_png(
        path, xs, lrs.tolist(), None if time_lrs is None else time_lrs.tolist(), marks, p.cuts, p.metrics,
        getattr(getattr(p.schedule, "model", None), "monitor", "metric"),
        f"{p.name}: {full}" if full else f"{p.name} (defaults)", f"{lr_text(p)}, max_duration={p.clock.max_duration}",
        p.clock.tokens_per_batch, "learning rate" if p.lr is not None else "LR multiplier", loss_curve,
    )  # fmt: skip


def human(tokens: float) -> str:
    """``2.5B``, ``300M``, ``12k``: token counts short enough for axis ticks."""
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(tokens) >= scale:
            return f"{tokens / scale:g}{suffix}"
    return f"{tokens:g}"


def render_png(
    path: str,
    xs: Sequence[int],
    lrs: Sequence[float],
    time_lrs: Sequence[float] | None,
    marks: Sequence[Any],
    cuts: Sequence[Any],
    metrics: Sequence[tuple[int, float]] | None,
    monitor: str,
    title: str,
    subtitle: str,
    tokens_per_batch: int | None,
    ylabel: str,
    loss_curve: tuple[list[int], list[float]] | None = None,
    time_label: str = "time part (base x warmup)",
) -> tuple[int, int]:
    """Draw the schedule to ``path``, each mark a labelled vertical line; return the image size in pixels.

    ``time_label``: the legend of ``time_lrs``, the plateau's LR without its cuts.
    """
    from matplotlib.ticker import FuncFormatter

    from foundry_ext.figures import pyplot, save_figure

    plt = pyplot()

    fig, ax = plt.subplots(figsize=(10, 5.2), dpi=100)
    try:
        if time_lrs is not None:
            ax.plot(xs, time_lrs, color="tab:gray", linestyle="--", linewidth=1.2, label=time_label)
            ax.plot(xs, lrs, color="tab:blue", linewidth=1.8, label="with simulated plateau cuts")
        else:
            ax.plot(xs, lrs, color="tab:blue", linewidth=1.8, label="learning rate")
        colors = ["tab:green", "tab:orange", "tab:purple", "tab:brown", "tab:olive", "tab:cyan"]
        named = [m for m in marks if not m.label.startswith("cut ")]
        for i, mark in enumerate(named[:12]):  # a legend entry per mark; beyond 12 (restarts, steps) lines only
            ax.axvline(
                mark.batch,
                color=colors[i % len(colors)],
                linestyle=":",
                linewidth=1.3,
                label=f"{mark.label} (batch {mark.batch})",
            )
        for mark in named[12:]:
            ax.axvline(mark.batch, color="tab:gray", linestyle=":", linewidth=0.8)
        if len(named) > 12:
            ax.plot([], [], color="tab:gray", linestyle=":", label=f"... {len(named) - 12} more marks")
        if cuts:
            index = {b: i for i, b in enumerate(xs)}
            cx = [c.batch for c in cuts]
            cy = [lrs[index[b]] for b in cx]
            ax.scatter(cx, cy, color="tab:red", marker="v", s=60, zorder=5, label="simulated cut")
            for i, c in enumerate(cuts):
                ax.annotate(
                    f"cut {i + 1}",
                    (c.batch, lrs[index[c.batch]]),
                    textcoords="offset points",
                    xytext=(4, 6),
                    fontsize=8,
                    color="tab:red",
                )
        if loss_curve is not None:
            law_ax = ax.twinx()
            law_ax.plot(*loss_curve, color="tab:red", linewidth=1.5, label="predicted loss (--law)")
            law_ax.set_ylabel("predicted loss (--law)", color="tab:red")
            law_ax.tick_params(axis="y", colors="tab:red")
        if metrics:
            twin = ax.twinx()
            twin.plot([b for b, _ in metrics], [v for _, v in metrics], "o", color="tab:red", alpha=0.35, markersize=4)
            twin.set_ylabel(f"{monitor} (dots)", color="tab:red")
            twin.tick_params(axis="y", colors="tab:red")
        ax.set_xlabel("batch")
        ax.set_ylabel(ylabel)
        ax.set_xlim(0, xs[-1])
        ax.set_ylim(bottom=0)
        # plain numbers (0.0006) rather than an offset label ("1e-3") that collides with the top axis
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.3g}"))
        ax.grid(True, alpha=0.3)
        if tokens_per_batch:
            top = ax.secondary_xaxis("top", functions=(lambda b: b * tokens_per_batch, lambda t: t / tokens_per_batch))
            top.xaxis.set_major_formatter(FuncFormatter(lambda v, _: human(v)))
            top.set_xlabel("tokens (full-length sequences assumed)")
        wrapped = "\n".join(textwrap.wrap(title, 100)[:3])
        ax.set_title(f"{wrapped}\n{subtitle}", fontsize=10)
        ax.legend(loc="best", fontsize=8, framealpha=0.85)
        width, height = save_figure(fig, path)  # OSError, ValueError: a missing folder, an unknown extension
    finally:
        plt.close(fig)
    return width, height
