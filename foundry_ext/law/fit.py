r"""Fit a loss law to runs: a Huber loss on log-loss, parameters in their valid ranges, several starting points.

The objective, as Luo et al. fit the multi-power law, with :math:`\delta = 10^{-3}`:

.. math::
    \min_\theta \sum_{i} \mathrm{Huber}_\delta\big(\log y_i - \log \hat L_\theta(t_i)\big)

over every loss :math:`y_i` measured after the warmup of every run. It is solved by scipy's bounded trust-region
least squares (``least_squares(method="trf", loss="huber", f_scale=delta)``, the same Huber loss up to a constant
factor) with the law's analytic Jacobian, from a grid of starting points; the best end point wins.

The LRs are divided by the largest LR of the runs while fitting, so that the starting points and bounds do not
depend on the LR scale; the parameters are converted back (:func:`from_unit_lr`) and reported in the runs' units,
as the paper reports them.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from foundry_ext.law import multipower
from foundry_ext.law.forms import form_of
from foundry_ext.law.trace import Trace

__all__ = [
    "HUBER_DELTA",
    "FitError",
    "FitResult",
    "RunQuality",
    "check_compatible",
    "check_identifiable",
    "decays_after_warmup",
    "fit",
    "from_unit_lr",
    "quality",
]

HUBER_DELTA = 1e-3
MIN_LOSSES = 10  # more losses than the multi-power law's seven parameters, with a margin


class FitError(ValueError):
    """Runs that cannot identify the law: one line saying why and what to add."""


@dataclass(frozen=True)
class RunQuality:
    """How well the law matches one run: R^2, mean and worst relative error over the run's losses after warmup."""

    name: str
    points: int
    r2: float
    mean_rel: float
    worst_rel: float


@dataclass
class FitResult:
    """A fitted law: its form, parameters (runs' LR units), and its quality on the runs it was fitted on."""

    form: str
    params: dict[str, float]
    runs: list[RunQuality]
    seconds: float
    starts: int
    lr_scale: float
    extra: dict[str, float] = field(default_factory=dict)


def _scaled(trace: Trace, scale: float) -> Trace:
    return Trace(trace.name, trace.lr / scale, trace.steps, trace.loss, trace.warmup)


def from_unit_lr(form: str, p: Sequence[float], scale: float) -> list[float]:
    """Parameters fitted on LRs divided by ``scale``, in the runs' own LR units (:mod:`foundry_ext.law.forms`)."""
    return form_of(form).to_runs_units(p, scale)


def quality(name: str, loss: np.ndarray, pred: np.ndarray) -> RunQuality:
    """R^2, mean and worst relative error of ``pred`` against ``loss``."""
    rel = np.abs(pred - loss) / loss
    ss_tot = float(np.sum((loss - loss.mean()) ** 2))
    r2 = 1.0 - float(np.sum((pred - loss) ** 2)) / ss_tot if ss_tot > 0 else float("nan")
    return RunQuality(name, len(loss), r2, float(rel.mean()), float(rel.max()))


def check_identifiable(traces: Sequence[Trace]) -> None:
    """Refuse runs that cannot identify the law (one run, every LR constant after warmup, too few losses)."""
    if len(traces) < 2:
        raise FitError(
            f"{len(traces)} run given: the law needs two or more runs of one model and data, with different "
            "schedules (e.g. a constant and a cosine)"
        )
    decays = [t for t in traces if decays_after_warmup(t)]
    if not decays:
        raise FitError(
            "every run's LR is constant after its warmup: the decay term (B, C, beta, gamma) cannot be identified; "
            "add a run whose LR decays (a cosine, a step or a WSD cooldown)"
        )
    counts = {t.name: int(t.fit_mask().sum()) for t in traces}
    if sum(counts.values()) < MIN_LOSSES or min(counts.values()) < 2:
        detail = ", ".join(f"{k}: {v}" for k, v in counts.items())
        raise FitError(
            f"too few losses after warmup ({detail}): the fit needs at least 2 per run and {MIN_LOSSES} in all; "
            "log the loss more often"
        )


def check_compatible(traces: Sequence[Trace]) -> None:
    """Refuse runs that cannot be of one model, data and unit: LR scales, lengths or loss scales far apart.

    The law is fitted in the runs' own units, so a run logged in tokens mixed with one in batches (lengths 100x
    apart or more), a multiplier mixed with LRs (peaks 10x apart or more) or perplexity mixed with cross-entropy
    (median losses 2x apart or more) would be fitted as one curve family and silently give nonsense.
    """
    if len(traces) < 2:
        return

    def spread(values: dict[str, float], limit: float, what: str, hint: str) -> None:
        lo = min(values, key=values.__getitem__)
        hi = max(values, key=values.__getitem__)
        if values[lo] <= 0 or values[hi] / values[lo] >= limit:
            raise FitError(
                f"the runs' {what} differ {values[hi] / max(values[lo], 1e-300):.3g}x ({hi}: {values[hi]:.4g}, "
                f"{lo}: {values[lo]:.4g}; allowed below {limit:g}x): {hint}"
            )

    spread({t.name: float(np.max(t.lr)) for t in traces}, 10.0, "peak LRs", "a multiplier mixed with LRs?")
    spread({t.name: float(t.batches) for t in traces}, 100.0, "lengths", "steps in tokens mixed with batches?")
    with_loss = {t.name: float(np.median(t.loss)) for t in traces if len(t.loss)}
    if len(with_loss) >= 2:
        spread(with_loss, 2.0, "median losses", "perplexity or bits mixed with cross-entropy in nats?")


def decays_after_warmup(t: Trace) -> bool:
    """Whether the run's LR falls anywhere after its warmup (within the batches it measured)."""
    d = multipower.drops(t.lr)[int(t.warmup or 0) + 1 : int(t.steps.max(initial=0))]
    return bool(np.any(d > 1e-9 * float(np.max(t.lr, initial=0.0))))


def _data(traces: Sequence[Trace]) -> tuple[list[tuple[Trace, np.ndarray]], np.ndarray, list[slice]]:
    items, ys, spans = [], [], []
    start = 0
    for t in traces:
        mask = t.fit_mask()
        items.append((t, t.steps[mask]))
        ys.append(t.loss[mask])
        spans.append(slice(start, start + int(mask.sum())))
        start += int(mask.sum())
    return items, np.concatenate(ys), spans


def fit(traces: Sequence[Trace], form: str = "multipower", m: int = 8) -> FitResult:
    """Fit ``form`` (``multipower`` or ``tissue``) to ``traces``; see the module docstring.

    Raises:
        FitError: the runs cannot identify the law.
    """
    from scipy.optimize import least_squares

    try:
        record = form_of(form)
    except ValueError as e:
        raise FitError(str(e)) from None
    check_identifiable(traces)
    check_compatible(traces)
    began = time.perf_counter()
    scale = max(float(np.max(t.lr)) for t in traces)
    scaled = [_scaled(t, scale) for t in traces]
    items, y, spans = _data(scaled)
    log_y = np.log(y)
    model = record.design(items, m)

    def residual(p: np.ndarray) -> np.ndarray:
        pred = model.predict(p)
        return log_y - np.log(np.maximum(pred, 1e-12))

    def jac(p: np.ndarray) -> np.ndarray:
        pred, j = model.predict_and_jacobian(p)
        return -j / np.maximum(pred, 1e-12)[:, None]

    lower, upper, starts = record.bounds_and_starts(items, y)
    best = None
    for x0 in starts:
        x0 = np.clip(x0, lower + 1e-12, upper - 1e-12)
        try:
            res = least_squares(
                residual,
                x0,
                jac=jac,
                bounds=(lower, upper),
                method="trf",
                loss="huber",
                f_scale=HUBER_DELTA,
                x_scale="jac",
                max_nfev=150,
            )
        except (ValueError, FloatingPointError):
            continue
        if np.isfinite(res.cost) and (best is None or res.cost < best.cost):
            best = res
    if best is None:
        raise FitError("the fit failed from every starting point (the losses do not follow the law's shape)")
    pred = model.predict(best.x)
    runs = [quality(t.name, y[s], pred[s]) for t, s in zip(traces, spans, strict=True)]
    params = dict(zip(record.names, record.to_runs_units(best.x, scale), strict=True))
    return FitResult(form, params, runs, time.perf_counter() - began, len(starts), scale)
