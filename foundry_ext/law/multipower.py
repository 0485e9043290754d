r"""The multi-power law of Luo et al. (ICLR 2025, arXiv 2503.12811): the loss after ``t`` batches of any LR schedule.

.. math::
    L(t) = L_0 + A\,(S_1(t) + S_W)^{-\alpha} - LD(t), \qquad S_1(t) = \sum_{\tau=1}^{t} \eta_\tau,

    LD(t) = B \sum_{k=1}^{t} (\eta_{k-1} - \eta_k)\, G\!\left(\eta_k^{-\gamma} S_k(t)\right), \qquad
    S_k(t) = \sum_{\tau=k}^{t} \eta_\tau, \qquad G(x) = 1 - (C x + 1)^{-\beta}.

:math:`S_1(t) + S_W` is the LR summed over every batch trained, warmup included. The drop sum runs, as in the
authors' code (``thu-yao-01-luo/MultiPowerLaw``, ``src/models.py``), over every batch from the second on, warmup
included: a warmup's rises are negative drops, whose term is nearly constant after the warmup and is absorbed by
:math:`L_0`. With that convention the paper's published 25M parameters give the paper's 0.110% mean error on its
six held-out curves (``tests/law/test_law_paper.py``); summing from the end of the warmup instead gives 3.2%, so the
published parameters belong to this convention. In this package's 0-indexed batches (``lr[b]``, a loss measured
after ``n`` batches) that reads :math:`S_1 + S_W = \sum_{b<n} lr_b` and
:math:`LD = B \sum_{b=1}^{n-1} (lr_{b-1} - lr_b)\, G(lr_b^{-\gamma} \sum_{j=b}^{n-1} lr_j)`.

:func:`loss_exact` evaluates that sum term by term (``O(n)`` per point: the reference). :class:`Design` evaluates it
at many points of long traces in ``O(m log n)`` per point: the drops ``lr_{b-1} - lr_b`` are grouped into blocks
whose width grows with their distance from the point (exact for the ``m`` batches nearest to it, then blocks of at
most ``1/m`` of that distance), each block carried by its summed drop at its drop-weighted centre. A step decay is a
single drop and stays exact; a smooth decay is integrated to second order (``tests/law/test_law_multipower.py``
bounds the difference to the exact sum).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from foundry_ext.law.trace import Trace

__all__ = ["Design", "G", "drops", "loss_drop_exact", "loss_exact", "lr_area"]

# the smallest LR a drop is evaluated at, relative to the peak: lr_b = 0 (a decay to 0) gives x = inf, G = 1
_LR_FLOOR = 1e-12


def G(x: np.ndarray | float, C: float, beta: float) -> np.ndarray:
    r""":math:`G(x) = 1 - (C x + 1)^{-\beta}`: how much of a drop's loss reduction has arrived after LR area ``x``."""
    return 1.0 - (C * np.asarray(x, dtype=np.float64) + 1.0) ** (-beta)


def lr_area(lr: np.ndarray, steps: np.ndarray) -> np.ndarray:
    r""":math:`S_1(t) + S_W = \sum_{b < n} lr_b`, the LR summed over every batch trained, at each ``n`` of ``steps``."""
    prefix = np.concatenate([[0.0], np.cumsum(lr, dtype=np.float64)])
    return prefix[np.asarray(steps)]


def drops(lr: np.ndarray) -> np.ndarray:
    r"""``d[b] = lr[b-1] - lr[b]`` (:math:`\eta_{k-1} - \eta_k`) for every batch ``b >= 1``; ``d[0] = 0``."""
    lr = np.asarray(lr, dtype=np.float64)
    d = np.zeros(len(lr))
    if len(lr) > 1:
        d[1:] = lr[:-1] - lr[1:]
    return d


def loss_drop_exact(lr: np.ndarray, n: int, B: float, C: float, beta: float, gamma: float) -> float:
    r""":math:`LD` after ``n`` batches, summed term by term (the reference :class:`Design` is checked against)."""
    lr = np.asarray(lr, dtype=np.float64)[:n]
    d = drops(lr)
    tail = np.cumsum(lr[::-1])[::-1]  # tail[b] = sum_{j=b}^{n-1} lr_j = S_k(t)
    peak = float(np.max(lr)) if len(lr) else 1.0
    u = np.maximum(lr, _LR_FLOOR * peak)
    nz = d != 0
    return float(B * np.sum(d[nz] * G(u[nz] ** (-gamma) * tail[nz], C, beta)))


def loss_exact(params: Sequence[float], lr: np.ndarray, steps: Sequence[int]) -> np.ndarray:
    """The law at each of ``steps`` (losses after that many batches), every term summed exactly: ``O(n)`` a point."""
    L0, A, alpha, B, C, beta, gamma = (float(p) for p in params)
    area = lr_area(lr, np.asarray(steps))
    ld = np.array([loss_drop_exact(lr, int(n), B, C, beta, gamma) for n in steps])
    with np.errstate(divide="ignore"):
        return L0 + A * area ** (-alpha) - ld


def _distance_grid(longest: int, m: int) -> np.ndarray:
    """Block edges by distance from the point: ``0, 1, .., m``, then growing by ``1/m`` of the distance."""
    edges = [0]
    while edges[-1] < longest:
        e = edges[-1]
        edges.append(e + max(1, e // m))
    return np.asarray(edges, dtype=np.int64)


@dataclass
class _Pairs:
    """(point, block) pairs of the grouped drop sum, flattened: all that depends on the trace, not the parameters."""

    point: np.ndarray  # index of the point the block contributes to
    drop: np.ndarray  # the block's summed drop (lr units)
    lr: np.ndarray  # the LR at its drop-weighted centre
    area: np.ndarray  # S_k(t): the LR summed from its centre to the point


class Design:
    """The law's inputs for a set of (trace, steps) pairs, precomputed once; :meth:`predict` then costs ``O(pairs)``.

    Args:
        items: ``(trace, steps)`` pairs; the law is evaluated at every ``steps`` of every trace, concatenated.
        m: batches summed exactly next to each point (and the inverse relative width of the farther blocks).
    """

    def __init__(self, items: Sequence[tuple[Trace, np.ndarray]], m: int = 16) -> None:
        points: list[np.ndarray] = []
        pairs: list[_Pairs] = []
        offset = 0
        for trace, steps in items:
            steps = np.asarray(steps, dtype=np.int64)
            points.append(lr_area(trace.lr, steps))
            pairs.append(self._pairs(trace, steps, m, offset))
            offset += len(steps)
        self.n = offset
        self.area = np.concatenate(points) if points else np.zeros(0)
        self.point = np.concatenate([p.point for p in pairs])
        self.drop = np.concatenate([p.drop for p in pairs])
        self.pair_lr = np.concatenate([p.lr for p in pairs])
        self.pair_area = np.concatenate([p.area for p in pairs])
        self.log_lr = np.log(self.pair_lr)

    @staticmethod
    def _pairs(trace: Trace, steps: np.ndarray, m: int, offset: int) -> _Pairs:
        lr = trace.lr
        n = len(lr)
        if len(steps) and (steps.max() > n or steps.min() < 0):
            raise ValueError(f"{trace.name}: steps must be within 0..{n} (the batches whose LR is known)")
        d = drops(lr)
        idx = np.arange(n, dtype=np.float64)
        prefix = np.concatenate([[0.0], np.cumsum(lr)])
        peak = float(np.max(np.abs(lr))) if n else 1.0
        grid = _distance_grid(int(steps.max()) if len(steps) else 0, m)
        # block j of point t covers batches [t - grid[j+1], t - grid[j]), clipped to [0, t)
        hi = np.maximum(steps[:, None] - grid[None, :-1], 0)
        lo = np.maximum(steps[:, None] - grid[None, 1:], 0)
        out = []
        for part in (np.maximum(d, 0.0), np.minimum(d, 0.0)):  # rises and falls each keep a centre of their own
            q = np.concatenate([[0.0], np.cumsum(part)])
            qb = np.concatenate([[0.0], np.cumsum(part * idx)])
            mass = q[hi] - q[lo]
            keep = (hi > lo) & (np.abs(mass) > 1e-15 * max(peak, 1e-300))
            if not keep.any():
                continue
            rows = np.nonzero(keep)[0]
            mass = mass[keep]
            centre = (qb[hi] - qb[lo])[keep] / mass
            centre = np.clip(centre, lo[keep], hi[keep] - 1)
            at = np.interp(centre, idx, lr)
            area = prefix[steps[rows]] - np.interp(centre, np.arange(n + 1, dtype=np.float64), prefix)
            out.append(_Pairs(rows + offset, mass, np.maximum(at, _LR_FLOOR * peak), area))
        if not out:
            z = np.zeros(0)
            return _Pairs(np.zeros(0, dtype=np.int64), z, z, z)
        return _Pairs(*(np.concatenate([getattr(p, f) for p in out]) for f in ("point", "drop", "lr", "area")))

    def loss_drop(self, B: float, C: float, beta: float, gamma: float) -> np.ndarray:
        """:math:`LD` at every point."""
        x = np.exp(-gamma * self.log_lr) * self.pair_area
        g = 1.0 - (C * x + 1.0) ** (-beta)
        return B * np.bincount(self.point, weights=self.drop * g, minlength=self.n)

    def predict(self, params: Sequence[float]) -> np.ndarray:
        """The law at every point."""
        L0, A, alpha, B, C, beta, gamma = (float(p) for p in params)
        with np.errstate(divide="ignore"):
            return L0 + A * self.area ** (-alpha) - self.loss_drop(B, C, beta, gamma)

    def predict_and_jacobian(self, params: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """The law at every point and its derivatives by the parameters (columns: ``FORMS["multipower"].names``)."""
        L0, A, alpha, B, C, beta, gamma = (float(p) for p in params)
        power = self.area ** (-alpha)
        x = np.exp(-gamma * self.log_lr) * self.pair_area
        cx1 = C * x + 1.0
        q = cx1 ** (-beta)
        g = 1.0 - q
        w = self.drop
        pt = self.point

        def total(values: np.ndarray) -> np.ndarray:
            return np.bincount(pt, weights=values, minlength=self.n)

        sum_g = total(w * g)
        dq = beta * q / cx1  # d G / d (C x)
        jac = np.empty((self.n, 7))
        jac[:, 0] = 1.0
        jac[:, 1] = power
        jac[:, 2] = -A * power * np.log(self.area)
        jac[:, 3] = -sum_g
        jac[:, 4] = -B * total(w * dq * x)
        jac[:, 5] = -B * total(w * q * np.log(cx1))
        jac[:, 6] = B * total(w * dq * C * x * self.log_lr)
        return L0 + A * power - B * sum_g, jac
