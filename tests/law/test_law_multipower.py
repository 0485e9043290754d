"""The multi-power law term by term on a hand-computed 10-batch example, and the grouped sum against the exact one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from foundry_ext.law import multipower
from foundry_ext.law.forms import FORMS
from foundry_ext.law.runs import read_csv
from foundry_ext.law.trace import Trace, find_warmup
from tests.law.paper import CURVES

# 10 batches: a 3-batch warmup to 0.3, two at the peak, a step to 0.2, a step to 0.1
LR = [0.1, 0.2, 0.3, 0.3, 0.3, 0.2, 0.2, 0.1, 0.1, 0.1]
PARAMS = (2.0, 0.5, 0.5, 2.0, 1.5, 0.6, 0.5)  # L0, A, alpha, B, C, beta, gamma


def test_ten_batches_term_by_term() -> None:
    L0, A, alpha, B, C, beta, gamma = PARAMS
    # the LR area after 10 batches: every batch, warmup included
    assert multipower.lr_area(np.array(LR), np.array([10]))[0] == pytest.approx(1.9)
    # the drops eta_{k-1} - eta_k of batches 1..9 (batch 0 has none): the warmup rises count negative
    assert multipower.drops(np.array(LR)).tolist() == pytest.approx([0, -0.1, -0.1, 0, 0, 0.1, 0, 0.1, 0, 0])
    # each nonzero term d_b * G(lr_b^-gamma * S_b(10)), S_b(10) = LR summed over batches b..9, by hand
    terms = {
        1: (-0.1, 0.2, 1.8),  # (drop, lr_b, S_b(10))
        2: (-0.1, 0.3, 1.6),
        5: (0.1, 0.2, 0.7),
        7: (0.1, 0.1, 0.3),
    }
    ld = 0.0
    for drop, lr_b, area in terms.values():
        x = lr_b ** (-gamma) * area
        ld += drop * (1 - (C * x + 1) ** (-beta))
    ld *= B
    # the same, with the numbers written out: 4.02492, 2.92119, 1.56525, 0.94868 are the x's
    assert ld == pytest.approx(
        2.0 * (-0.1 * (1 - 7.03738 ** -0.6) - 0.1 * (1 - 5.38179 ** -0.6) + 0.1 * (1 - 3.34787 ** -0.6)
               + 0.1 * (1 - 2.42302 ** -0.6)), abs=1e-5)  # fmt: skip
    assert multipower.loss_drop_exact(np.array(LR), 10, B, C, beta, gamma) == pytest.approx(ld, rel=1e-12)
    expected = L0 + A * 1.9 ** (-alpha) - ld
    assert multipower.loss_exact(PARAMS, np.array(LR), [10])[0] == pytest.approx(expected, rel=1e-12)
    assert math.isclose(expected, 2.0 + 0.5 / math.sqrt(1.9) - ld)
    # the grouped evaluator is exact while every block is one batch (m >= the distance)
    trace = Trace("ten", np.array(LR))
    steps = np.arange(1, 11)
    exact = multipower.loss_exact(PARAMS, np.array(LR), steps)
    assert multipower.Design([(trace, steps)], m=16).predict(PARAMS) == pytest.approx(exact, rel=1e-12)
    assert find_warmup(np.array(LR)) == 3


@pytest.mark.parametrize("name", ["cosine_72000", "wsd_20000_24000", "wsdcon_3"])
def test_grouped_sum_matches_the_exact_sum_on_long_traces(name: str) -> None:
    """The O(m log n) sum against the O(n) one.

    Within 2e-5 relative at m = 8 (the fit's; 100x below the errors that matter), 2e-6 at m = 128.
    """
    trace = read_csv(str(CURVES / f"{name}.csv"))
    steps = trace.steps[trace.fit_mask()][::25]
    params = (3.04, 0.525, 0.508, 363.8, 2.066, 0.583, 0.641)
    exact = multipower.loss_exact(params, trace.lr, steps)
    for m, tol in ((8, 2e-5), (128, 2e-6)):
        grouped = multipower.Design([(trace, steps)], m=m).predict(params)
        assert np.max(np.abs(grouped - exact) / exact) < tol, m


def test_jacobian_matches_finite_differences() -> None:
    trace = read_csv(str(CURVES / "cosine_24000.csv"))
    design = multipower.Design([(trace, trace.steps[trace.fit_mask()])])
    params = np.array([3.04, 0.525, 0.508, 363.8, 2.066, 0.583, 0.641])
    _, jac = design.predict_and_jacobian(params)
    for i in range(7):
        h = 1e-6 * max(abs(params[i]), 1e-3)
        up, down = params.copy(), params.copy()
        up[i] += h
        down[i] -= h
        numeric = (design.predict(up) - design.predict(down)) / (2 * h)
        assert np.allclose(jac[:, i], numeric, rtol=1e-4, atol=1e-9), FORMS["multipower"].names[i]
