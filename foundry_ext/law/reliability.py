r"""How far a fitted law can be trusted: leave-one-run-out checks, a verdict, the fitted domain, and bands.

**Leave-one-run-out.** With three or more runs, the law is refitted once per run without it and predicts that run
at every loss after its warmup: mean and worst relative error, and the relative error of its final loss. A run
whose absence leaves runs that cannot identify the law (the only decaying run) is reported as not checkable.

**Verdict** (``good``, ``rough``, ``poor``) from the training error (mean over runs of the mean relative error of
the fit on its own runs), the held-out error (mean over checked runs of their mean relative error) and the number of
decaying runs, with the thresholds of :data:`THRESHOLDS`; they were chosen on half of the three-run fits of the
paper's 25M curves and of this package's tiny runs and confirmed on the other half
(``bench/bench_law_reliability.py``, ``bench/data/law-reliability.json``, docs/law.md):

- ``good``: training error <= ``good_train`` and held-out error <= ``good_held_out``, two or more decaying runs,
  every run checked;
- ``poor``: training error > ``poor_train`` or held-out error > ``poor_held_out``;
- ``rough`` otherwise, and at best with two runs (nothing held out) or one decaying run.

**Band** of a prediction ``p`` (the law's loss after some batches of a schedule), from the sub-fits' predictions
``p_i`` of the same schedule and the law's own error ``e`` (:func:`model_error`):

.. math::
    w = k\,\max_i |p_i - p| + p\,\big(e + c\,\max(0, \log(S / S_{fit}), \log(n / n_{fit}))\big), \qquad
    e = \max(e_{train},\; m\, e_{cv},\; f)

with :math:`e_{train}` the training error, :math:`e_{cv}` the leave-one-run-out error (the root mean square over
the checked runs of the relative error of their final loss, predicted by the law refitted without them), :math:`S`
the schedule's LR area (the LR summed over its batches) and :math:`n` its length against the largest of the fitted
runs'; ``k``, ``m``, ``f`` and ``c`` from :data:`BAND`; the band is ``[p - w, p + w]``. The sub-fits' spread is the
parameters' uncertainty; ``e`` is the law's own error, which the spread misses when every sub-fit is wrong the same
way (the law's form, not its parameters); ``f`` is a floor for it, chosen with ``k``, ``m`` and ``c`` on the
held-out curves of half of the three-run fits of the paper's 25M curves and this package's tiny runs (``m`` came out
0: the runs left out did not tell which fits miss more) and confirmed on the rest (``bench/bench_law_reliability.py``,
docs/law.md). Without sub-fits (two runs) there is no band.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from foundry_ext.law.fit import FitError, FitResult, decays_after_warmup, fit
from foundry_ext.law.predict import predict
from foundry_ext.law.trace import Trace

__all__ = [
    "BAND",
    "THRESHOLDS",
    "VERDICTS",
    "Check",
    "Domain",
    "Reliability",
    "band",
    "check",
    "domain_of",
    "judge",
    "model_error",
]

VERDICTS = ("good", "rough", "poor")
# chosen and confirmed on data: bench/bench_law_reliability.py (docs/law.md, "How sure it is")
THRESHOLDS = {"good_train": 0.0015, "good_held_out": 0.008, "poor_train": 0.004, "poor_held_out": 0.01}
# chosen on half of the fits and confirmed on the rest (docs/law.md, "The band")
BAND = {"k": 1.0, "m": 0.0, "f": 0.002, "c": 0.005}


@dataclass
class Check:
    """One run left out: the law refitted without it, predicting it (relative errors), or why it could not."""

    name: str
    checkable: bool
    mean_rel: float | None = None
    worst_rel: float | None = None
    final_rel: float | None = None
    params: list[float] | None = None
    reason: str = ""


@dataclass
class Domain:
    """What the law was fitted on: per quantity, the (lowest, highest) over the runs."""

    peak_lr: tuple[float, float]
    batches: tuple[int, int]
    lr_area: tuple[float, float]
    warmup: tuple[int, int]
    loss: tuple[float, float]


@dataclass
class Reliability:
    """The evidence and the verdict."""

    verdict: str
    reason: str
    train_mean_rel: float
    train_worst_rel: float
    held_out_mean_rel: float | None
    decaying_runs: int
    runs: int
    checks: list[Check] = field(default_factory=list)


def domain_of(traces: Sequence[Trace]) -> Domain:
    """The fitted runs' ranges of peak LR, length, LR area, warmup and measured loss (after warmup)."""

    def span(values: list[float]) -> tuple[float, float]:
        return (min(values), max(values))

    losses = [float(v) for t in traces for v in t.loss[t.fit_mask()]] or [float(v) for t in traces for v in t.loss]
    return Domain(
        peak_lr=span([float(np.max(t.lr)) for t in traces]),
        batches=(min(t.batches for t in traces), max(t.batches for t in traces)),
        lr_area=span([float(np.sum(t.lr)) for t in traces]),
        warmup=(min(int(t.warmup or 0) for t in traces), max(int(t.warmup or 0) for t in traces)),
        loss=span(losses),
    )


def judge(train_mean: float, held_out: float | None, decaying: int, runs: int, unchecked: int) -> tuple[str, str]:
    """The verdict and a one-line reason, from the evidence (see the module docstring)."""
    t = THRESHOLDS
    if train_mean > t["poor_train"]:
        return "poor", f"the law misses its own runs by {train_mean:.2%} on average (poor above {t['poor_train']:.2%})"
    if held_out is not None and held_out > t["poor_held_out"]:
        return "poor", (
            f"refitted without each run it misses that run by {held_out:.2%} on average "
            f"(poor above {t['poor_held_out']:.2%})"
        )
    if runs < 3:
        return "rough", f"fitted on {runs} runs: nothing held out to check it; add a third run (e.g. a WSD or a step)"
    if decaying < 2:
        return "rough", "one decaying run: leaving it out cannot refit; add a second run whose LR decays differently"
    if unchecked:
        return "rough", f"{unchecked} run(s) could not be checked (see the table)"
    if train_mean > t["good_train"] or held_out is None or held_out > t["good_held_out"]:
        return "rough", (
            f"training error {train_mean:.2%}, held-out error {held_out if held_out is None else f'{held_out:.2%}'} "
            f"(good at most {t['good_train']:.2%} and {t['good_held_out']:.2%})"
        )
    return "good", (
        f"training error {train_mean:.2%} <= {t['good_train']:.2%}, held-out error {held_out:.2%} <= "
        f"{t['good_held_out']:.2%}"
    )


def check(traces: Sequence[Trace], result: FitResult) -> Reliability:
    """Leave each run out (three or more runs), refit, predict it; the verdict on the evidence."""
    checks = []
    if len(traces) >= 3:
        for i, left in enumerate(traces):
            rest = [t for j, t in enumerate(traces) if j != i]
            try:
                sub = fit(rest, result.form)
            except FitError as e:
                checks.append(Check(left.name, False, reason=str(e).split(":")[0]))
                continue
            params = list(sub.params.values())
            mask = left.fit_mask()
            pred = predict(result.form, params, left.lr, left.steps[mask])
            loss = left.loss[mask]
            rel = np.abs(pred - loss) / loss
            final = float(rel[-1]) if len(rel) else None
            checks.append(Check(left.name, True, float(rel.mean()), float(rel.max()), final, params))
    train_mean = float(np.mean([q.mean_rel for q in result.runs]))
    train_worst = float(max(q.worst_rel for q in result.runs))
    done = [c.mean_rel for c in checks if c.checkable and c.mean_rel is not None]
    held_out = float(np.mean(done)) if done else None
    decaying = sum(decays_after_warmup(t) for t in traces)
    unchecked = sum(not c.checkable for c in checks)
    verdict, reason = judge(train_mean, held_out, decaying, len(traces), unchecked)
    return Reliability(verdict, reason, train_mean, train_worst, held_out, decaying, len(traces), checks)


def model_error(train_mean: float, checks: Sequence[object]) -> float:
    r""":math:`e = \max(e_{train}, m\, e_{cv}, f)`, the band's relative error term (see the module docstring).

    Args:
        train_mean: the training error :math:`e_{train}`.
        checks: the leave-one-run-out checks, :class:`Check` objects or LAW.json's ``checks`` objects; those with a
            ``final_rel`` give :math:`e_{cv}`, the root mean square of their ``final_rel``.
    """

    def final(c: object) -> float | None:
        v = c.get("final_rel") if isinstance(c, dict) else getattr(c, "final_rel", None)
        return None if v is None else float(v)

    finals = [v for v in map(final, checks) if v is not None]
    cv = math.sqrt(sum(v * v for v in finals) / len(finals)) if finals else 0.0
    return max(train_mean, BAND["m"] * cv, BAND["f"])


def band(
    form: str,
    params: Sequence[float],
    subfits: Sequence[Sequence[float]],
    error: float,
    domain: Domain | None,
    lr: np.ndarray,
    steps: np.ndarray,
    pred: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray] | None:
    """``(low, high)`` of the band at each of ``steps`` (see the module docstring); None without sub-fits.

    ``error`` is the law's relative error :math:`e` (:func:`model_error`).
    """
    if not subfits:
        return None
    if pred is None:
        pred = predict(form, params, lr, steps)
    spread = np.zeros(len(steps))
    for p in subfits:
        spread = np.maximum(spread, np.abs(predict(form, p, lr, steps) - pred))
    area = np.concatenate([[0.0], np.cumsum(lr)])[np.asarray(steps)]
    fitted_area = domain.lr_area[1] if domain is not None else math.inf
    fitted_len = domain.batches[1] if domain is not None else math.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        far = np.maximum.reduce(
            [
                np.zeros(len(steps)),
                np.log(np.maximum(area, 1e-300) / max(fitted_area, 1e-300)),
                np.log(np.maximum(np.asarray(steps, dtype=np.float64), 1.0) / max(fitted_len, 1)),
            ]
        )
    w = BAND["k"] * spread + pred * (error + BAND["c"] * far)
    w = np.where(np.isfinite(w), w, math.inf)
    return pred - w, pred + w


# how far past the fitted runs a schedule may go before a warning (rounding and a little margin; docs/law.md)
SLACK = {"peak_lr": 1.1, "lr_area": 1.1, "batches": 1.1}


def extrapolation(domain: Domain | None, lr: np.ndarray) -> list[str]:
    """One line per quantity of the schedule ``lr`` outside what the law was fitted on (peak LR, LR area, length)."""
    if domain is None or not len(lr):
        return []
    asked = {"peak_lr": float(np.max(lr)), "lr_area": float(np.sum(lr)), "batches": float(len(lr))}
    what = {"peak_lr": "peak LR", "lr_area": "LR area (the LR summed over every batch)", "batches": "length (batches)"}
    out = []
    for key, value in asked.items():
        lo, hi = getattr(domain, key)
        below = key == "peak_lr" and value < lo / SLACK[key]
        if value > hi * SLACK[key] or below:
            out.append(
                f"{what[key]} {value:.4g} is outside the fitted runs' {lo:.4g} to {hi:.4g}: the law extrapolates"
            )
    return out


def refuse_reason(form: str, params: Sequence[float], steps: np.ndarray, pred: np.ndarray) -> str | None:
    """Why a prediction cannot be given (a loss not finite, or below the law's ``L0``), or None."""
    bad = ~np.isfinite(pred)
    if bad.any():
        i = int(np.argmax(bad))
        return f"the law's loss after batch {int(steps[i])} is {pred[i]} (the LR summed up to there is 0 or not finite)"
    low = pred < params[0]
    if low.any():
        i = int(np.argmax(low))
        return f"the law's loss after batch {int(steps[i])} is {pred[i]:.4g}, below its L0 {params[0]:.4g}"
    return None
