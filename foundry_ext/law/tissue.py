r"""The LR-annealing law of Tissue et al. (arXiv 2408.11029): a power law in the LR area minus an annealing area.

.. math::
    L(t) = L_0 + A\, S_1(t)^{-\alpha} - C\, S_2(t), \qquad S_1(t) = \sum_{i=1}^{t} \eta_i, \qquad
    S_2(t) = \sum_{i=1}^{t} m_i, \qquad m_i = \lambda\, m_{i-1} + (\eta_{i-1} - \eta_i),

so :math:`S_2(t) = \sum_{k \le t} (\eta_{k-1} - \eta_k)\,(1 - \lambda^{t-k+1}) / (1 - \lambda)`: each LR drop lowers
the loss by :math:`C/(1-\lambda)` per unit of LR, arriving with a delay set by the momentum factor :math:`\lambda`
(the paper suggests 0.999; here it is fitted, in ``[0, 0.99999]``). As for the multi-power law, :math:`S_1` is the
LR summed over every batch trained and the drops are those of every batch, warmup included
(:func:`foundry_ext.law.multipower.drops`); five parameters ``L0, A, alpha, C, lambda``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from foundry_ext.law.multipower import drops, lr_area
from foundry_ext.law.trace import Trace

__all__ = ["Design", "annealing_area"]


def _momentum(d: np.ndarray, lam: float) -> np.ndarray:
    """``m_b = lam * m_{b-1} + d_b`` (a first-order recursive filter)."""
    from scipy.signal import lfilter

    return lfilter([1.0], [1.0, -lam], d)


def annealing_area(lr: np.ndarray, lam: float) -> np.ndarray:
    r""":math:`S_2` after ``n`` batches for every ``n`` in ``0 .. len(lr)`` (index ``n``)."""
    m = _momentum(drops(lr), lam)
    return np.concatenate([[0.0], np.cumsum(m)])


class Design:
    """The Tissue et al. law at the ``steps`` of each trace (``O(batches)`` per evaluation: a recursive filter)."""

    def __init__(self, items: Sequence[tuple[Trace, np.ndarray]]) -> None:
        self.items = [(drops(t.lr), np.asarray(s, dtype=np.int64)) for t, s in items]
        self.area = np.concatenate([lr_area(t.lr, s) for t, s in items]) if items else np.zeros(0)
        self.n = len(self.area)

    def _s2(self, lam: float, derivative: bool = False) -> tuple[np.ndarray, np.ndarray | None]:
        values, slopes = [], []
        for d, steps in self.items:
            m = _momentum(d, lam)
            values.append(np.concatenate([[0.0], np.cumsum(m)])[steps])
            if derivative:  # d m_b / d lam = m_{b-1} + lam * d m_{b-1} / d lam: the same filter on m shifted
                dm = _momentum(np.concatenate([[0.0], m[:-1]]), lam)
                slopes.append(np.concatenate([[0.0], np.cumsum(dm)])[steps])
        return np.concatenate(values), (np.concatenate(slopes) if derivative else None)

    def predict(self, params: Sequence[float]) -> np.ndarray:
        L0, A, alpha, C, lam = (float(p) for p in params)
        s2, _ = self._s2(lam)
        with np.errstate(divide="ignore"):
            return L0 + A * self.area ** (-alpha) - C * s2

    def predict_and_jacobian(self, params: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        L0, A, alpha, C, lam = (float(p) for p in params)
        s2, ds2 = self._s2(lam, derivative=True)
        assert ds2 is not None
        power = self.area ** (-alpha)
        jac = np.empty((self.n, 5))
        jac[:, 0] = 1.0
        jac[:, 1] = power
        jac[:, 2] = -A * power * np.log(self.area)
        jac[:, 3] = -s2
        jac[:, 4] = -C * ds2
        return L0 + A * power - C * s2, jac
