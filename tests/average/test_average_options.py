"""``foundry-ext average``'s options read before any checkpoint is opened: weights, selection, ``--out`` (no torch)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from foundry_ext.average.options import AverageError, Selection, check_out, parse_selection, parse_weights, weights_for


@pytest.mark.parametrize(
    ("text", "count", "expected"),
    [
        pytest.param("uniform", 4, [0.25, 0.25, 0.25, 0.25], id="uniform"),
        pytest.param("exp:0.5", 3, [1 / 7, 2 / 7, 4 / 7], id="exp-newest-heaviest"),
        pytest.param("exp:1", 2, [0.5, 0.5], id="exp-1-is-uniform"),
        pytest.param("1,1,2", 3, [0.25, 0.25, 0.5], id="list-normalised"),
        pytest.param("0,0,1", 3, [0.0, 0.0, 1.0], id="list-newest-only"),
        pytest.param("-1,3", 2, [-0.5, 1.5], id="list-negative-allowed-positive-sum"),
    ],
)
def test_weights_are_normalised_oldest_first(text: str, count: int, expected: list[float]) -> None:
    got = weights_for(parse_weights(text), count)
    assert got == pytest.approx(expected, rel=1e-15)
    assert math.fsum(got) == pytest.approx(1.0, rel=1e-15)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param("nan,1", "--weights nan,1: nan is not a finite number", id="nan"),
        pytest.param("1,inf", "--weights 1,inf: inf is not a finite number", id="inf"),
        pytest.param("1,-1", "--weights 1,-1: the weights sum to 0; they must sum to a positive number", id="zero-sum"),
        pytest.param("-2,1", "sum to -1; they must sum to a positive number", id="negative-sum"),
        pytest.param("1,,2", "--weights 1,,2: '' is not a number", id="empty-item"),
        pytest.param("exp:0", "--weights exp:0: BETA must be in (0, 1]", id="exp-0"),
        pytest.param("exp:1.5", "BETA must be in (0, 1]", id="exp-above-1"),
        pytest.param("exp:x", "--weights exp:x: 'x' is not a number", id="exp-not-number"),
        pytest.param("ema", "expected uniform, exp:BETA (0 < BETA <= 1) or a list of numbers", id="unknown-word"),
    ],
)
def test_bad_weights_are_one_line(text: str, message: str) -> None:
    with pytest.raises(AverageError, match=None) as e:
        parse_weights(text)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_a_weight_list_of_the_wrong_length_names_both_counts() -> None:
    with pytest.raises(AverageError, match=r"--weights 1,2: 2 weights for 3 checkpoints; give one per checkpoint"):
        weights_for(parse_weights("1,2"), 3)


@pytest.mark.parametrize(
    ("last", "every", "batches", "expected"),
    [
        pytest.param(None, None, None, [6, 12, 18, 24, 30], id="all"),
        pytest.param("3", None, None, [18, 24, 30], id="last-3"),
        pytest.param(None, "2", None, [6, 18, 30], id="every-2-counted-from-the-newest"),
        pytest.param(None, "2", "6:24", [12, 24], id="range-then-every"),
        pytest.param("2", "2", None, [18, 30], id="every-then-last"),
        pytest.param(None, None, "12:", [12, 18, 24, 30], id="open-end"),
        pytest.param(None, None, ":12", [6, 12], id="open-start"),
    ],
)
def test_selection_of_a_save_folder(
    last: str | None, every: str | None, batches: str | None, expected: list[int]
) -> None:
    assert parse_selection(last, every, batches).apply([30, 6, 18, 12, 24]) == expected


@pytest.mark.parametrize(
    ("last", "every", "batches", "message"),
    [
        pytest.param("1", None, None, "--last 1: must be >= 2", id="last-1"),
        pytest.param("x", None, None, "--last x: not a whole number", id="last-text"),
        pytest.param(None, "0", None, "--every 0: must be >= 1", id="every-0"),
        pytest.param(None, None, "12", "--batches 12: expected A:B", id="no-colon"),
        pytest.param(None, None, "20:10", "--batches 20:10: the first batch is after the last", id="reversed"),
        pytest.param(None, None, "a:10", "--batches a:10: A = a: not a whole number", id="range-text"),
    ],
)
def test_bad_selection_is_one_line(last: str | None, every: str | None, batches: str | None, message: str) -> None:
    with pytest.raises(AverageError) as e:
        parse_selection(last, every, batches)
    assert message in str(e.value)


def test_out_is_refused_existing_missing_folder_or_inside_a_save_folder(tmp_path: Path) -> None:
    run = tmp_path / "run" / "checkpoints"
    run.mkdir(parents=True)
    (tmp_path / "exists.pt").write_bytes(b"")
    cases = {
        str(tmp_path / "exists.pt"): "already exists",
        str(tmp_path / "nodir" / "a.pt"): "does not exist",
        str(run / "avg.pt"): "inside the run's save folder",
        str(run / "sub" / ".." / "avg.pt"): "does not exist",  # sub is missing: refused before the resolve
    }
    (run / "deeper").mkdir()
    cases[str(run / "deeper" / "avg.pt")] = "inside the run's save folder"
    for out, message in cases.items():
        with pytest.raises(AverageError, match=message):
            check_out(out, False, [run])
    assert check_out(str(tmp_path / "avg.pt"), False, [run]) == tmp_path / "avg.pt"
    assert Selection().given is False


def test_options_import_no_torch() -> None:
    import subprocess

    code = "import foundry_ext.average.options, foundry_ext.average.selection, sys; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
