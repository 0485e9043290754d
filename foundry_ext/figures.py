"""Writing a figure: matplotlib without a display, and one way to lay out, save and close a figure.

``foundry-ext plot``, ``foundry-ext lr-find --png`` and the benchmarks draw with matplotlib; it is imported only when
a figure is drawn (a second or so).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["pyplot", "save_figure"]


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the Agg backend: files only, no display needed (a server, CI)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save_figure(
    fig: Any, path: str | Path, *, dpi: float | None = None, fmt: str | None = None, make_folder: bool = False
) -> tuple[int, int]:
    """Lay out ``fig``, write it to ``path`` and close it; return the image size in pixels.

    Args:
        fig: the matplotlib figure.
        path: where to write it.
        dpi: resolution; None keeps the figure's own.
        fmt: image format; None takes it from the file name.
        make_folder: create the missing folders of ``path`` (else a missing folder is an ``OSError``).
    """
    plt = pyplot()
    try:
        fig.tight_layout()
        if make_folder:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi="figure" if dpi is None else dpi, format=fmt)
        return fig.canvas.get_width_height()
    finally:
        plt.close(fig)
