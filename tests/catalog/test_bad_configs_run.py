"""Issue 34's one-line answers, and the options and YAML shapes ``foundry-ext validate`` refuses in one line.

The rows themselves (issue 21's families, applied to every scheduler by name, and issue 34's cases) are rows of the
bad-config corpus, :mod:`tests.catalog.corpus`, through every surface in ``tests/catalog/test_bad_configs.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from foundry_ext.cli import main
from tests.catalog.corpus import BAD, FAMILY_BASE
from tests.support.configs import write_train_yaml

PYTHON_TEXT = re.compile(
    r"Traceback|\b(Type|Value|Key|Attribute|Index|ZeroDivision|Overflow|Recursion|Memory|Runtime|Assertion)Error\b"
    r"|\blist\[|expected\s+or\b"
)


ONE_LINE = ["plateau-min_lr-text", "wsd-t_max-before-end", "power-t_max-before-end", "exponential-gamma-above-1",
            "plateau-mode-max-on-eval-loss", "guard-without-save_folder", "guard-quarantine-named-latest",
            "guard-save_filename-lz4"]  # fmt: skip


@pytest.mark.parametrize("case", ONE_LINE)
def test_one_mistake_is_one_line(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34's cases: one line each (a string min_lr was two, one per member of ``float | list[float]``)."""
    config, field = BAD[case].config, BAD[case].field
    config = write_train_yaml(tmp_path / "cfg.yaml", config)
    assert main(["validate", str(config), "--strict"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert field in err


def test_min_lr_text_names_both_forms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_train_yaml(tmp_path / "cfg.yaml", BAD["plateau-min_lr-text"].config)
    assert main(["validate", str(config)]) == 2
    assert capsys.readouterr().err == (
        f"{config}: scheduler.min_lr: 'abc' (str) is not a number or a list; expected a number or a list of numbers\n"
    )


def test_t_max_before_the_end_says_what_the_tail_trains_at(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_train_yaml(tmp_path / "cfg.yaml", BAD["wsd-t_max-before-end"].config)
    assert main(["validate", str(config), "--strict"]) == 2
    assert capsys.readouterr().err == (
        f"{config}: warning: scheduler.t_max: 30ba (30 batches) ends before max_duration=40ba (40 batches): the last "
        "10 batches train at alpha_f (0.1); set t_max: 1dur, or shorten the run\n"
    )


@pytest.mark.parametrize("option", ["--world-size", "--batches-per-epoch", "--tokens-per-batch", "--samples-per-batch"])
@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_clock_options_below_one_are_refused(
    option: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_train_yaml(tmp_path / "cfg.yaml", FAMILY_BASE)
    with pytest.raises(SystemExit) as stopped:
        main(["validate", str(config), f"{option}={value}"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}: '{value}' is not" in err and "expected an integer >= 1" in err
    assert not PYTHON_TEXT.search(err), err


@pytest.mark.parametrize("shape", ["mapping", "list"])
def test_yaml_nested_hundreds_deep_is_named_by_key_and_line(
    shape: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_train_yaml(tmp_path / "cfg.yaml", FAMILY_BASE)
    text = config.read_text()
    line = len(text.splitlines()) + 1
    if shape == "mapping":
        deep = "deep_key:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 400)) + "  " * 400 + "v: 1\n"
        line += 100  # the line of the 101st level
    else:
        deep = "deep_key: " + "[" * 500 + "]" * 500 + "\n"
    config.write_text(text + deep)
    assert main(["validate", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"invalid YAML: values nested too deep under 'deep_key' (line {line})" in err, err
    assert len(err.splitlines()) == 1 and not PYTHON_TEXT.search(err), err
