"""The PNG of ``foundry-ext law predict --out``: the LR and the predicted loss with its band, measured losses beside.

matplotlib through :mod:`foundry_ext.figures` (no display), imported only when the figure is drawn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

__all__ = ["draw_prediction"]


def draw_prediction(
    path: str,
    steps: np.ndarray,
    lr: np.ndarray,
    pred: np.ndarray,
    band: tuple[np.ndarray, np.ndarray] | None,
    measured: dict[int, float] | None,
    warmup: int,
    title: str,
) -> tuple[int, int]:
    """Draw the LR (left axis) and the predicted loss, its band and the measured losses (right axis) at ``steps``.

    The loss axis spans the values after ``warmup`` batches: the first losses, far higher, would set its scale.

    Returns:
        The image's size in pixels.

    Raises:
        OSError, ValueError: ``path`` cannot be written (a missing folder, an unknown extension).
    """
    import numpy as np

    from foundry_ext.figures import pyplot, save_figure

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 5.2), dpi=100)
    try:
        ax.plot(steps, lr, color="tab:blue", label="learning rate")
        ax.set_xlabel("batch")
        ax.set_ylabel("learning rate", color="tab:blue")
        twin = ax.twinx()
        if band is not None:
            twin.fill_between(steps, band[0], band[1], color="tab:red", alpha=0.18, linewidth=0, label="band")
        twin.plot(steps, pred, color="tab:red", label="predicted loss")
        after = steps > warmup
        shown = [pred[after]]
        if band is not None:
            shown += [band[0][after], band[1][after]]
        if measured:
            twin.plot(list(measured), list(measured.values()), ".", color="black", markersize=3, label="measured")
            shown.append(np.array([v for s, v in measured.items() if s > warmup]))
        values = np.concatenate([v[np.isfinite(v)] for v in shown]) if shown else np.zeros(0)
        if len(values):
            lo, hi = float(values.min()), float(values.max())
            pad = 0.05 * (hi - lo) or 0.01 * abs(hi) or 0.01
            twin.set_ylim(lo - pad, hi + pad)
        twin.set_ylabel("loss (after warmup)", color="tab:red")
        twin.legend(loc="upper right", fontsize=8)
        ax.set_title(title, fontsize=10)
    except BaseException:
        plt.close(fig)
        raise
    return save_figure(fig, path)
