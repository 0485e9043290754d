"""``anneal``'s and ``law tune --branch-from``'s options read through one resolver and one registry each.

A decay given as a fraction (``--decay 0.45dur``) is resolved by :func:`foundry_ext.config.durations.dur_length`;
the decay shapes are :data:`foundry_ext.schedules.wsd.DECAY_TYPES`, the type of the schedules' ``decay_type``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from foundry_ext.anneal.options import AnnealError, parse_shape
from foundry_ext.cli import main
from foundry_ext.config.durations import DurationError, dur_length
from foundry_ext.schedules.wsd import DECAY_TYPES, WarmupStableDecay
from foundry_ext.schedules.wsd_periods import WSDPeriods
from tests.anneal.conftest import Runs
from tests.law.paper import CURVES, TRAIN


@pytest.mark.parametrize(
    ("fraction", "start", "length", "rounded"),
    [
        (0.2, 8000, 2000, 2000),  # docs/anneal.md's example
        (0.2, 8, 2, 2),
        (0.5, 8, 8, 8),  # int(0.5 * 16) = 8 and int(0.5 * 15) = 7: the largest
        (0.45, 8, 6, 7),  # int(0.45 * 14) = 6; round(0.45 * 8 / 0.55) = 7, and int(0.45 * 15) = 6, not 7
        (0.3, 4, 1, 2),  # int(0.3 * 5) = 1; round(1.2 / 0.7) = 2, and int(0.3 * 6) = 1
    ],
)
def test_a_fraction_is_the_length_that_is_exactly_that_fraction_of_the_branch(
    fraction: float, start: int, length: int, rounded: int
) -> None:
    assert dur_length(fraction, start) == length
    assert int(fraction * (start + length)) == length  # what t_decay: {fraction}dur gives with max_duration s + LEN
    assert round(fraction * start / (1 - fraction)) == rounded  # law tune's old answer, one batch off in two rows


def test_a_fraction_no_length_gives_is_refused_in_one_line() -> None:
    with pytest.raises(
        DurationError, match=r"^from batch 3 no branch length is exactly 0.2 of the whole run \(e\.g\. "
    ):
        dur_length(0.2, 3)


@pytest.fixture(scope="module")
def law(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("law") / "law.json"
    assert main(["law", "fit", *(str(CURVES / f"{n}.csv") for n in TRAIN), "--out", str(path)]) == 0
    return path


def test_anneal_and_law_tune_read_the_same_fraction_as_the_same_length(
    runs: Runs, law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--decay 0.45dur`` from batch 8: 6 batches in both (law tune said 7 by rounding, a run anneal never writes)."""
    out = tmp_path / "b.yaml"
    assert main(["anneal", str(runs.stable), str(runs.config), "--decay", "0.45dur", "--out", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["max_duration"] == "14ba"
    capsys.readouterr()
    argv = ["law", "tune", str(law), str(runs.config), "--branch-from", "8", "--decay", "0.45dur,4ba"]
    assert main(argv) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if re.match(r"\s+\d+\. ", line)]
    ranked = [[word for word in row.split() if word.startswith(("from=", "decay=", "end="))] for row in rows]
    assert sorted(ranked) == [["from=8", "decay=4ba", "end=12"], ["from=8", "decay=6ba", "end=14"]]
    # a fraction no length gives: both refuse it, with the same reason
    assert (
        main(
            ["anneal", str(runs.stable / "ep0-ba4-rank0.pt"), str(runs.config), "--decay", "0.1dur", "--out", str(out)]
        )
        == 2
    )
    anneal_err = capsys.readouterr().err
    assert main(["law", "tune", str(law), str(runs.config), "--branch-from", "4", "--decay", "0.1dur,4ba"]) == 2
    law_err = capsys.readouterr().err
    reason = "from batch 4 no branch length is exactly 0.1 of the whole run"  # law tune said 1 batch
    assert reason in anneal_err and reason in law_err, (anneal_err, law_err)


def test_the_decay_shapes_are_the_schedules_decay_types() -> None:
    for model in (WarmupStableDecay, WSDPeriods):
        assert tuple(model.model_json_schema()["properties"]["decay_type"]["enum"]) == DECAY_TYPES
    assert [parse_shape(shape) for shape in DECAY_TYPES] == list(DECAY_TYPES)
    with pytest.raises(AnnealError, match=f"^--shape exp: not a decay shape; allowed: {', '.join(DECAY_TYPES)}$"):
        parse_shape("exp")


def test_law_tune_predicts_a_branch_at_the_lr_anneals_branch_trains_with(runs: Runs, tmp_path: Path) -> None:
    """``law/tune.branch_lr`` is the stable run's LR, then the LR of the YAML ``anneal`` writes, batch for batch.

    (It rebuilt the decay itself, one batch early: batch ``s + j`` at ``d(j / D)`` where the run has
    ``d((j - 1) / D)``.)
    """
    from foundry_ext.law.tune import branch_lr
    from foundry_ext.preview.pipeline import LRPipeline

    out = tmp_path / "b.yaml"
    argv = ["anneal", str(runs.stable), str(runs.config), "--decay", "6ba", "--shape", "sqrt", "--floor", "0.1"]
    assert main([*argv, "--out", str(out)]) == 0
    stable = LRPipeline.from_yaml(str(runs.config))
    tuned = branch_lr(stable, 8, 6, "sqrt", 0.1)
    assert len(tuned) == 14 and tuned[:8].tolist() == stable.lrs(0, 8).tolist()
    assert tuned[8:].tolist() == LRPipeline.from_yaml(str(out)).lrs(8).tolist()
    assert tuned[8] == tuned[9] == stable.base_lr  # batch 9 trains at timestamp 8, where the decay's p is 0
