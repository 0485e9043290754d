"""Messages name YAML paths, never Python types or exception names; deep YAML is one line; problems come first.

The cases are issue 21's: ``min_lr: [.nan]`` named ``scheduler.min_lr.float`` and ``scheduler.min_lr.list[float][0]``,
``override_decay`` given as a list said ``expected  or null (none)``, a 500-deep YAML list printed ``maximum recursion
depth exceeded``, and at training time the one clean line came after a 20-line traceback.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from foundry_ext.cli import main
from foundry_ext.config.errors import ConfigError
from tests.support.configs import tiny_train_config, write_train_yaml

BASE: dict[str, Any] = tiny_train_config(callbacks=None)
PYTHON = re.compile(r"\b\w+Error\b|Traceback|\blist\[|\.float\b|\bint\]|expected\s+or\b|expected\s*$|expected\s*;")


def _validate(tmp_path: Path, capsys: pytest.CaptureFixture[str], scheduler: dict[str, Any]) -> list[str]:
    path = write_train_yaml(tmp_path / "cfg.yaml", BASE, {"scheduler": scheduler})
    assert main(["validate", str(path)]) == 2
    return [line.removeprefix(f"{path}: ") for line in capsys.readouterr().err.splitlines()]


@pytest.mark.parametrize(
    ("scheduler", "lines"),
    [
        pytest.param(
            {"name": "reduce_lr_on_plateau", "min_lr": [float("nan")]},
            ["scheduler.min_lr[0]: nan is not a finite number; expected a number"],
            id="min_lr-list-nan",
        ),
        pytest.param(
            {"name": "reduce_lr_on_plateau", "min_lr": [0.1, "x"]},
            ["scheduler.min_lr[1]: 'x' (str) is not a number; expected a number"],
            id="min_lr-list-text",
        ),
        pytest.param(
            {"name": "stages", "stages": [{"duration": "1dur", "shape": "linear", "end": 0.1}], "override_decay": [1]},
            [
                "scheduler.override_decay: [1] (list) is not a mapping; expected a mapping with the keys start, "
                "duration, shape, end or null (none)"
            ],
            id="override_decay-list",
        ),
        pytest.param(
            {"name": "reduce_lr_on_plateau", "base": {"name": "step", "step_size": "0.001dur"}},
            [
                "scheduler.base.step_size: '0.001dur' converts to 0 batches in this run (max_duration=40ba, "
                "truncated as Composer does); the schedule needs it positive: give at least 1ba"
            ],
            id="plateau-base-zero-division",
        ),
    ],
)
def test_lines_name_yaml_paths(
    scheduler: dict[str, Any], lines: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    got = _validate(tmp_path, capsys, scheduler)
    assert got[: len(lines)] == lines
    assert not any(PYTHON.search(line) for line in got), got


@pytest.mark.parametrize(
    ("tail", "message"),
    [
        ("deep: " + "[" * 500 + "]" * 500 + "\n", "invalid YAML: values nested too deep"),
        ("deep: &x [*x]\n", "invalid YAML: YAML recursive aliases are not supported"),
    ],
    ids=["500-deep", "recursive"],
)
def test_deep_or_recursive_yaml_is_one_line(
    tail: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(BASE) + tail)
    assert main(["validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and message in err, err
    assert "recursion depth" not in err


def test_training_prints_the_problems_before_any_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """llm-foundry's ``train_from_yaml`` with ``scheduler.t_warmp``: the first stderr line is the problem."""
    from llmfoundry.command_utils import train_from_yaml

    path = write_train_yaml(tmp_path / "cfg.yaml", BASE, {"scheduler": {**BASE["scheduler"], "t_warmp": "10ba"}})
    with pytest.raises(ConfigError):
        train_from_yaml(str(path), [])
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("foundry-ext: error: scheduler.t_warmp: unknown key (did you mean 't_warmup'?)"), err
