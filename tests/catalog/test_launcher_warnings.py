"""A plateau that never checks used to train silently; through the real launcher it now warns before batch 0.

``composer train.py yamls/tiny-resume.yaml`` with a train-loss monitor checked every ``1000tok``: one batch is
16 x 128 = 2048 tokens, so no batch end is a multiple of 1000 tokens and the plateau never checks. The run trains (a
warning, not an error) and the warning line comes before the first batch's line.
"""

from __future__ import annotations

import pytest

from tests.support.launcher import REPO, RunComposer

pytestmark = pytest.mark.slow

TINY_RESUME = REPO / "yamls" / "tiny-resume.yaml"


def test_plateau_that_never_checks_warns_before_the_first_batch(run_composer: RunComposer) -> None:
    run = run_composer(
        TINY_RESUME,
        "scheduler.monitor=loss/train/total",
        "scheduler.check_interval=1000tok",
        "max_duration=4ba",
        "eval_interval=4ba",
        "save_folder=null",
        "autoresume=false",
        timeout=600,
    )
    lines = run.output.splitlines()
    warned = [i for i, line in enumerate(lines) if "scheduler.check_interval: '1000tok' is never a multiple" in line]
    first_batch = next(i for i, line in enumerate(lines) if line.startswith("[batch=1/"))
    assert len(warned) == 1 and warned[0] < first_batch, run.output[-3000:]
    assert lines[warned[0]].startswith("foundry-ext: warning: scheduler.check_interval: '1000tok' is never a multiple")
