"""The paper's protocol on its published 25M curves (../shared/loss-curves): the runs, fit and evaluation."""

from __future__ import annotations

import numpy as np

from foundry_ext.law.fit import fit, quality
from foundry_ext.law.predict import predict
from foundry_ext.law.runs import read_csv
from tests.support.launcher import REPO

CURVES = REPO / "bench/data/loss-curves/25M"  # the paper's, MIT: see its README
TRAIN = ("cosine_24000", "constant_24000", "wsdcon_9")
TEST = ("constant_72000", "cosine_72000", "wsd_20000_24000", "wsdld_20000_24000", "wsdcon_3", "wsdcon_18")
# the paper's repository README, 25M: fitted by the authors' code
PAPER = (3.04045406, 0.52468604, 0.50786857, 363.78751622, 2.06560812, 0.58279013, 0.64142257)


def evaluate(form: str, params, names=TEST):
    """Quality of ``params`` on each held-out curve, at every logged step after warmup."""
    out = []
    for name in names:
        t = read_csv(str(CURVES / f"{name}.csv"))
        m = t.fit_mask()
        out.append(quality(name, t.loss[m], predict(form, params, t.lr, t.steps[m])))
    return out


def protocol(form: str = "multipower"):
    """Fit on the three training curves; return the fit and the held-out qualities."""
    result = fit([read_csv(str(CURVES / f"{n}.csv")) for n in TRAIN], form)
    held_out = evaluate(form, list(result.params.values()))
    return result, held_out


def summary(held_out) -> tuple[float, float, float]:
    """Mean relative error, the paper's WorstE (each curve's worst, averaged), and the worst of all."""
    return (
        float(np.mean([q.mean_rel for q in held_out])),
        float(np.mean([q.worst_rel for q in held_out])),
        float(max(q.worst_rel for q in held_out)),
    )
