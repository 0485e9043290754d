"""The fit: a known law recovered from noisy curves; runs that cannot identify it refused with one line."""

from __future__ import annotations

import numpy as np
import pytest

from foundry_ext.law import multipower
from foundry_ext.law.fit import FitError, fit
from foundry_ext.law.trace import Trace
from tests.law.synthetic import TRUE, curve


def test_a_known_law_is_recovered_from_noisy_curves() -> None:
    runs = [curve("constant", 8000, seed=1), curve("cosine", 8000, seed=2), curve("step", 6000, seed=3)]
    result = fit(runs)
    got = list(result.params.values())
    # the constant-LR part is identified to 2%; the decay part is judged by what it predicts
    for i, name in enumerate(("L0", "A", "alpha")):
        assert got[i] == pytest.approx(TRUE[i], rel=0.02), name
    # held out: a WSD run three times longer; the prediction stays within 0.1% of the true law at every point
    held = curve("wsd", 24000, noise=0.0)
    pred = multipower.Design([(held, held.steps)]).predict(got)
    assert np.max(np.abs(pred - held.loss) / held.loss) < 1e-3
    # and the fit reports its quality on the runs it saw: about the noise (0.03%)
    assert all(q.mean_rel < 5e-4 and q.r2 > 0.99 for q in result.runs)


def test_tissue_law_fits_the_same_curves() -> None:
    runs = [curve("constant", 8000, seed=1), curve("cosine", 8000, seed=2), curve("step", 6000, seed=3)]
    result = fit(runs, "tissue")
    assert set(result.params) == {"L0", "A", "alpha", "C", "lam"}
    assert all(q.mean_rel < 2e-3 for q in result.runs)


@pytest.mark.parametrize(
    ("runs", "message"),
    [
        (lambda: [curve("cosine", 4000)], "1 run given: the law needs two or more runs"),
        (
            lambda: [curve("constant", 4000), curve("constant", 6000, seed=1)],
            "every run's LR is constant after its warmup",
        ),
        (
            lambda: [curve("constant", 4000, every=1000), curve("cosine", 4000, every=1000)],
            "too few losses after warmup (constant: 4, cosine: 4)",
        ),
        (
            lambda: [curve("constant", 4000), Trace("mult", curve("cosine", 4000).lr / 3e-4, *_pts("cosine"))],
            "the runs' peak LRs differ 3.33e+03x (mult: 1, constant: 0.0003",
        ),
        (
            lambda: [curve("constant", 4000), _in_tokens(curve("cosine", 4000), 1000)],
            "the runs' lengths differ 1e+03x",
        ),
        (
            lambda: [curve("constant", 4000), Trace("ppl", curve("cosine", 4000).lr, *_pts("cosine", np.exp))],
            "the runs' median losses differ",
        ),
    ],
)
def test_runs_that_cannot_identify_the_law_are_refused(runs, message: str) -> None:
    with pytest.raises(FitError) as e:
        fit(runs())
    assert message in str(e.value)
    assert "\n" not in str(e.value)


def _pts(kind: str, f=lambda x: x) -> tuple[np.ndarray, np.ndarray]:
    c = curve(kind, 4000)
    return c.steps, f(c.loss)


def _in_tokens(trace: Trace, per_batch: int) -> Trace:
    """The same run with its steps counted in tokens (``per_batch`` a batch)."""
    return Trace("tokens", np.repeat(trace.lr, per_batch), trace.steps * per_batch, trace.loss)
