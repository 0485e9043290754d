r"""One record per law form: its parameter names, valid ranges, starting points, unit conversion and design.

``fit``, ``predict``, ``lawfile`` and the CLI read a form from :data:`FORMS` (``FORMS["multipower"]``) instead of
branching on its name. The fit works on LRs divided by the runs' largest LR (starting points and bounds that do not
depend on the LR scale, "unit LR"); :meth:`Form.to_runs_units` converts the parameters back to the runs' own units,
which is what ``LAW.json`` holds and what :meth:`Form.ranges` bounds.

Importing this module imports neither numpy nor the laws (each is imported when a form is used): the CLI reads
:data:`FORMS`' names for ``--law-form`` when it builds its parser, and ``foundry-ext --help`` stays light.

Unit conversion (``s`` the scale the LRs were divided by): multi-power :math:`A = A' s^{\alpha}`, :math:`B = B'/s`,
:math:`C = C' s^{\gamma - 1}`; Tissue :math:`A = A' s^{\alpha}`, :math:`C = C'/s` (:math:`S_2` is linear in the LR).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

    from foundry_ext.law.trace import Trace

__all__ = ["BETA_MIN", "FORMS", "GAMMA_MAX", "Form", "form_of"]

BETA_MIN = 0.3  # beta -> 0 with B -> inf fits the three training curves better and predicts worse (docs/law.md)
GAMMA_MAX = 1.0

Items = Sequence[tuple["Trace", "np.ndarray"]]


@dataclass(frozen=True)
class Form:
    """A law form.

    Attributes:
        name: as ``--law-form`` and ``LAW.json``'s ``form`` spell it.
        names: the parameters, in the order :meth:`design`'s ``predict`` takes them.
        lower, upper: each parameter's valid range in the runs' LR units (``LAW.json``); the fit bounds ``L0`` by
            the lowest loss besides.
        design: ``Design(items, m)``: the law's inputs at every (trace, steps) pair (``m``: the multi-power law's
            batches summed exactly next to each point), with ``predict(params)`` and
            ``predict_and_jacobian(params)``.
        to_runs_units: parameters fitted on LRs divided by ``scale`` -> the runs' units.
        starts_tail: the decay part's starting values after ``L0, A, alpha``, given the loss spread (unit LR).
    """

    name: str
    names: tuple[str, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    design: Callable[[Items, int], object]
    to_runs_units: Callable[[Sequence[float], float], list[float]]
    starts_tail: Callable[[float], list[tuple[float, ...]]]

    def ranges(self) -> dict[str, tuple[float, float]]:
        """Each parameter's (lowest, highest) valid value, in the runs' LR units."""
        return dict(zip(self.names, zip(self.lower, self.upper, strict=True), strict=True))

    def bounds_and_starts(self, items: Items, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        """The fit's bounds (``L0`` at most the lowest loss) and starting points, on unit-LR traces ``items``.

        ``A`` and ``alpha`` of the constant-LR part come from a log-log line through the losses against the LR
        area, for ``L0`` at 0.8 and 0.92 of the lowest loss.
        """
        import numpy as np

        from foundry_ext.law import multipower

        y_min = float(y.min())
        area = np.concatenate([multipower.lr_area(t.lr, s) for t, s in items])
        heads = []
        for l0 in (y_min * 0.8, y_min * 0.92):
            gap = np.maximum(y - l0, 1e-6)
            slope, icpt = np.polyfit(np.log(area), np.log(gap), 1)
            heads.append((l0, float(np.exp(icpt)), float(np.clip(-slope, 0.05, 1.5))))
        spread = max(float(y.max() - y_min), 1e-3)
        lower = np.array(self.lower, dtype=np.float64)
        upper = np.array(self.upper, dtype=np.float64)
        upper[0] = y_min
        starts = [np.array([*head, *tail]) for head, tail in itertools.product(heads, self.starts_tail(spread))]
        return lower, upper, starts


def _multipower_units(p: Sequence[float], scale: float) -> list[float]:
    L0, A, alpha, B, C, beta, gamma = (float(v) for v in p)
    return [L0, A * scale**alpha, alpha, B / scale, C * scale ** (gamma - 1.0), beta, gamma]


def _tissue_units(p: Sequence[float], scale: float) -> list[float]:
    L0, A, alpha, C, lam = (float(v) for v in p)
    return [L0, A * scale**alpha, alpha, C / scale, lam]


def _multipower_design(items: Items, m: int) -> object:
    from foundry_ext.law import multipower

    return multipower.Design(items, m=m)


def _tissue_design(items: Items, m: int) -> object:
    del m  # the Tissue law sums every batch exactly
    from foundry_ext.law import tissue

    return tissue.Design(items)


FORMS: dict[str, Form] = {
    "multipower": Form(
        name="multipower",
        names=("L0", "A", "alpha", "B", "C", "beta", "gamma"),
        lower=(0.0, 0.0, 0.01, 0.0, 1e-6, BETA_MIN, 0.0),
        upper=(math.inf, math.inf, 3.0, math.inf, math.inf, 5.0, GAMMA_MAX),
        design=_multipower_design,
        to_runs_units=_multipower_units,
        starts_tail=lambda spread: [(0.5 * spread, c, 0.5, 0.5) for c in (0.03, 0.3)],
    ),
    "tissue": Form(
        name="tissue",
        names=("L0", "A", "alpha", "C", "lam"),
        lower=(0.0, 0.0, 0.01, 0.0, 0.0),
        upper=(math.inf, math.inf, 3.0, math.inf, 0.99999),
        design=_tissue_design,
        to_runs_units=_tissue_units,
        starts_tail=lambda spread: [(c * spread, lam) for c in (1e-3, 1e-2) for lam in (0.99, 0.999)],
    ),
}


def form_of(name: object) -> Form:
    """The form called ``name``.

    Raises:
        ValueError: no such form (one line naming the forms there are).
    """
    if not isinstance(name, str) or name not in FORMS:
        raise ValueError(f"law form {name!r} is unknown; expected one of {', '.join(FORMS)}")
    return FORMS[name]
