r"""Smoothing, the stop test and the LR suggestion rules of the range test, as pure functions of the recorded points.

The loss is smoothed by the bias-corrected exponential moving average that fastai and PyTorch Lightning use:

.. math::
    a_i = \beta a_{i-1} + (1 - \beta)\, \ell_i, \quad a_{-1} = 0, \qquad s_i = \frac{a_i}{1 - \beta^{i+1}}

:math:`s_i` averages the losses of batches :math:`i, i-1, \dots` with weights :math:`\propto \beta^k`, so it
describes an earlier point of the ramp than batch :math:`i`: with :math:`\beta = 0.98` its weights' centre is up
to 49 batches back, half of a 100-batch test. fastai and Lightning nevertheless plot and read :math:`s_i` against
:math:`lr_i`, the LR of batch :math:`i` (the "batch-LR reading"). The *lag-matched* reading pairs :math:`s_i` with
the same average of the LRs, taken on :math:`\ln lr` (the ramp is linear there):

.. math::
    \ln \bar{lr}_i = \frac{b_i}{1 - \beta^{i+1}}, \quad b_i = \beta b_{i-1} + (1 - \beta) \ln lr_i, \quad b_{-1} = 0

which for a ramp is exactly the LR of batch :math:`i - \text{lag}_i`, the weights' centre. Each rule below takes
the LRs to read the points at (:math:`lr_i` or :math:`\bar{lr}_i`), uses the window its own framework uses
(points before it and after it are skipped) and keeps finite points only:

- ``steepest`` (PyTorch Lightning up to 2.5.3, ``_LRFinder.suggestion``; fastai's ``steep``): the LR of the most
  negative :math:`\partial s / \partial \ln lr`, computed as ``numpy.gradient`` does (central differences,
  one-sided at the ends); Lightning took it against the point index, the same on evenly log-spaced points; window:
  skip 10 points at the start and 1 at the end.
- ``steepest_linear`` (PyTorch Lightning from 2.5.4): the same, but the gradient is taken against :math:`lr` itself
  (``torch.gradient(losses, spacing=[lrs])``), which favours small LRs on a log ramp; same window.
- ``minimum`` (fastai's ``minimum``): :math:`lr_{\arg\min s} / 10`; window: skip ``batches // 10`` points at the
  start and 5 at the end, cut at the first non-finite loss.
- ``valley`` (fastai's ``valley``, its default): the longest decreasing subsequence of :math:`s` ("the valley"),
  :math:`[k_0, k_1]`; the LR at :math:`k_0 + \lfloor (k_1 - k_0) / 3 \rfloor + \lfloor (k_1 - k_0) / 6 \rfloor`, about
  half-way down it; fastai's window.

A rule with fewer than 2 points in its window has no suggestion (``None``).

The tool's default is ``minimum``, read lag-matched, with :math:`\beta = 0.9` (a lag of 9 batches), on a ramp to
``--max 1``, chosen leave-one-corpus-out by ``bench/bench_lr_find.py`` over 4 corpora x 3 model sizes x 2 batch
sizes against constant-LR sweeps: every fold chose it; held out, it trained within the sweep's best two LRs on 22 of
the 24 cells for every range-test seed, and the sweep's best LR lay within :data:`RANGE_DECADES` of it in every
case (:func:`suggested_range`). fastai's and Lightning's reading (:math:`\beta = 0.98`, batch LRs) missed in most
cells (docs/benchmarks.md, "LR range test").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "DEFAULT_BETA",
    "DEFAULT_LR_MAX",
    "DEFAULT_LR_MIN",
    "DEFAULT_RULE",
    "RANGE_DECADES",
    "RULES",
    "RuleResult",
    "minimum",
    "paste_value",
    "pasted",
    "should_stop",
    "smooth",
    "smooth_lr",
    "steepest",
    "steepest_linear",
    "suggest_all",
    "suggested_range",
    "valley",
]

# The rule, smoothing, reading and ramp end the tool suggests with, chosen leave-one-corpus-out by
# bench/bench_lr_find.py (docs/benchmarks.md, "LR range test"): over 4 corpora x 3 model sizes x 2 batch sizes,
# fastai's minimum / 10 read lag-matched on a beta-0.9 EMA of a ramp to 1 was the choice of every fold; beta 0.8 (the
# default chosen on the demo corpus alone) missed the sweep's best two in 19 of 72 cases, the ramp to 10 in 12,
# fastai's and Lightning's settings in most.
DEFAULT_RULE = "minimum"
DEFAULT_BETA = 0.9
DEFAULT_LR_MIN = 1e-7
DEFAULT_LR_MAX = 1.0
# Half the width, in decades, of the range printed around the suggestion: the benchmark's best constant LR lay within
# it in every case held out (fitted on three corpora, judged on the fourth; docs/benchmarks.md, "LR range test")
RANGE_DECADES = 0.5
DIVERGENCE_FACTOR = 4.0  # fastai's and Lightning's: stop once the smoothed loss exceeds 4x its minimum so far


@dataclass(frozen=True)
class RuleResult:
    """A rule's suggestion: ``lr`` (None when its window is too short) and ``batch``, the point it read.

    ``at_window_end``: what the rule looks for (the minimum, the steepest descent, the end of the valley) is the last
    point of its window, so the real one may lie beyond: the ramp's end (``--max``) set the suggestion.
    """

    lr: float | None
    batch: int | None
    at_window_end: bool = False


def smooth(losses: Sequence[float], beta: float) -> list[float]:
    r"""The bias-corrected EMA :math:`s_i` of ``losses`` (see the module docstring); non-finite once a loss is."""
    avg = 0.0
    out = []
    for i, loss in enumerate(losses):
        avg = beta * avg + (1.0 - beta) * loss
        out.append(avg / (1.0 - beta ** (i + 1)))
    return out


def smooth_lr(lrs: Sequence[float], beta: float) -> list[float]:
    r"""The lag-matched LRs :math:`\bar{lr}_i`: the LRs averaged with the loss's weights, on :math:`\ln lr`."""
    return [math.exp(v) for v in smooth([math.log(lr) for lr in lrs], beta)]


def should_stop(smoothed: Sequence[float], factor: float = DIVERGENCE_FACTOR) -> bool:
    r"""Whether to stop after the last point: :math:`s_i` not finite, or :math:`s_i > f \cdot \min_{j \le i} s_j`."""
    last = smoothed[-1]
    if not math.isfinite(last):
        return True
    return last > factor * min(smoothed)


def _window(n: int, begin: int, end: int) -> range:
    return range(begin, max(begin, n - end))


def _finite(idx: range, values: Sequence[float]) -> list[int]:
    return [i for i in idx if math.isfinite(values[i])]


def _until_first_non_finite(idx: range, values: Sequence[float]) -> list[int]:
    kept = []
    for i in idx:
        if not math.isfinite(values[i]):
            break
        kept.append(i)
    return kept


def _steepest(lrs: Sequence[float], smoothed: Sequence[float], skip_begin: int, skip_end: int, log: bool) -> RuleResult:
    idx = _finite(_window(len(smoothed), skip_begin, skip_end), smoothed)
    deduped: list[int] = []
    for i in idx:  # batches 0 and 1 train at the same LR (Composer's timing): a zero spacing has no gradient
        if not deduped or lrs[i] != lrs[deduped[-1]]:
            deduped.append(i)
    if len(deduped) < 2:
        return RuleResult(None, None)
    losses = np.array([smoothed[i] for i in deduped], dtype=np.float64)
    xs = np.array([lrs[i] for i in deduped], dtype=np.float64)
    grads = np.gradient(losses, np.log(xs) if log else xs)
    best = deduped[int(np.argmin(grads))]
    return RuleResult(float(lrs[best]), best, best == deduped[-1])


def steepest(lrs: Sequence[float], smoothed: Sequence[float], skip_begin: int = 10, skip_end: int = 1) -> RuleResult:
    """Lightning (<= 2.5.3): the LR of the most negative gradient of the smoothed loss against ``ln lr``."""
    return _steepest(lrs, smoothed, skip_begin, skip_end, log=True)


def steepest_linear(
    lrs: Sequence[float], smoothed: Sequence[float], skip_begin: int = 10, skip_end: int = 1
) -> RuleResult:
    """Lightning (>= 2.5.4): the LR of the most negative gradient of the smoothed loss against the LR itself."""
    return _steepest(lrs, smoothed, skip_begin, skip_end, log=False)


def minimum(lrs: Sequence[float], smoothed: Sequence[float], batches: int, skip_end: int = 5) -> RuleResult:
    """The rule ``minimum`` of fastai: a tenth of the LR at the minimum of the smoothed loss; fastai's window."""
    idx = _until_first_non_finite(_window(len(smoothed), batches // 10, skip_end), smoothed)
    if len(idx) < 2:
        return RuleResult(None, None)
    best = min(idx, key=lambda i: smoothed[i])
    return RuleResult(float(lrs[best]) / 10.0, best, best == idx[-1])


def valley(lrs: Sequence[float], smoothed: Sequence[float], batches: int, skip_end: int = 5) -> RuleResult:
    """The rule ``valley`` of fastai (its default): half-way down the longest decreasing run of the smoothed loss."""
    idx = _until_first_non_finite(_window(len(smoothed), batches // 10, skip_end), smoothed)
    if len(idx) < 2:
        return RuleResult(None, None)
    losses = [smoothed[i] for i in idx]
    n = len(losses)
    # fastai's O(n^2) longest-decreasing-subsequence scan, kept as written (start = end - length, as in fastai)
    lds = [1] * n
    max_start = max_end = 0
    for i in range(1, n):
        for j in range(i):
            if losses[i] < losses[j] and lds[i] < lds[j] + 1:
                lds[i] = lds[j] + 1
            if lds[max_end] < lds[i]:
                max_end = i
                max_start = max_end - lds[max_end]
    sections = (max_end - max_start) / 3
    # fastai's start can be -1 (a valley from the first point); clamped, so that a 2-point window does not index -1
    best = idx[max(0, max_start + int(sections) + int(sections / 2))]
    return RuleResult(float(lrs[best]), best, max_end == n - 1)


RULES = ("minimum", "valley", "steepest", "steepest_linear")


def suggest_all(lrs: Sequence[float], smoothed: Sequence[float], batches: int) -> dict[str, RuleResult]:
    """Every rule's suggestion, keyed by name (:data:`RULES`), reading ``smoothed[i]`` at ``lrs[i]``.

    ``batches`` is the planned length (``--batches``); ``lrs`` are the batch LRs or the lag-matched ones.
    """
    return {
        "minimum": minimum(lrs, smoothed, batches),
        "valley": valley(lrs, smoothed, batches),
        "steepest": steepest(lrs, smoothed),
        "steepest_linear": steepest_linear(lrs, smoothed),
    }


def paste_value(lr: float) -> str:
    """``lr`` as the tool's ``optimizer.lr=`` line writes it: 2 significant digits, always with a dot.

    ``3.2e-03``, which YAML and OmegaConf read as a float.
    """
    return f"{lr:.1e}"


def pasted(lr: float) -> float:
    """The value of :func:`paste_value`: the LR a user trains."""
    return float(paste_value(lr))


def suggested_range(lr: float, decades: float = RANGE_DECADES) -> tuple[float, float]:
    r"""The range around a suggestion :math:`s` (as pasted): :math:`[s \cdot 10^{-d}, s \cdot 10^{d}]`, ``d = decades``.

    With the default :data:`RANGE_DECADES` (0.5, a factor of :math:`\sqrt{10} \approx 3.16` either side) it held the
    best LR of the benchmark's constant-LR sweeps in every held-out case.
    """
    s = pasted(lr)
    return s * 10.0**-decades, s * 10.0**decades
