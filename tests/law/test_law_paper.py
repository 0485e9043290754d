"""The paper's protocol on its published 25M curves: fit on three, predict the six others at every logged step.

The paper (repository README, 25M) reports a mean relative error (PredE) of 0.110% and a WorstE of 0.409%; its log
(``logs/25.log``) shows that WorstE is each held-out curve's worst error averaged over the six curves. The issue asks
for <= 0.14% and <= 0.6%. Every figure here is recorded in docs/law.md.
"""

from __future__ import annotations

import pytest

from tests.law.paper import PAPER, evaluate, protocol, summary

# this fit's result, recorded (docs/law.md); scipy's least squares is deterministic for the same inputs
REFERENCE = {"L0": 3.0098, "A": 0.54240, "alpha": 0.50256, "B": 498.90, "C": 0.08525, "beta": 0.3, "gamma": 0.8970}


def test_the_papers_parameters_give_the_papers_error_with_this_formula() -> None:
    """The published parameters, evaluated by this package's law: the paper's PredE to 0.001%."""
    mean, mean_worst, _ = summary(evaluate("multipower", PAPER))
    assert mean == pytest.approx(0.00110, abs=1e-5)
    # 0.381% here against the README's 0.409%: the authors also score the point at the last warmup step (2160), where
    # cosine_72000 is off by 0.71%; the law is fitted and scored after the warmup here
    assert mean_worst == pytest.approx(0.00409, abs=3e-4)


def test_multipower_fit_meets_the_protocol() -> None:
    result, held_out = protocol("multipower")
    mean, mean_worst, worst = summary(held_out)
    assert mean <= 0.0014
    assert mean_worst <= 0.006
    assert worst < 0.007  # 0.66%: cosine_72000 right after the warmup (the paper's own parameters: 0.64%, wsdcon_3)
    for name, value in REFERENCE.items():
        assert result.params[name] == pytest.approx(value, rel=0.01), name
    assert all(q.r2 > 0.998 for q in result.runs)


def test_tissue_law_on_the_same_protocol() -> None:
    """The simpler law: about as good on average (0.136%), worse at its worst (0.57% mean of worst, 0.76% max)."""
    _, held_out = protocol("tissue")
    mean, mean_worst, worst = summary(held_out)
    assert mean <= 0.0015
    assert mean_worst <= 0.0065
    assert worst < 0.0085
