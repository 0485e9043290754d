"""``foundry-ext validate``: every problem of a config in one run, built with llm-foundry's own builders."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from foundry_ext.cli import main

GOOD = """\
variables:
  max_seq_len: 64
max_seq_len: ${variables.max_seq_len}
global_train_batch_size: 4
device_train_microbatch_size: 4
max_duration: 1000ba
model: {name: mpt_causal_lm, d_model: 16, n_heads: 2, n_layers: 1}
tokenizer: {name: gpt2}
train_loader: {name: text, dataset: {local: x, split: train}}
optimizer: {name: decoupled_adamw, lr: 1.0e-3}
scheduler: {name: warmup_stable_decay, t_warmup: 100ba, t_decay: 0.2dur, decay_type: sqrt}
callbacks:
  lr_monitor: {}
  speed_monitor: {window_size: 10}
"""

MANY_PROBLEMS = """\
model: {name: mpt_causal_lm}
tokenizer: {name: gpt2}
train_loader: {name: text, dataset: {local: x, split: train}}
global_train_batch_size: 4
device_train_microbatch_size: 4
max_seq_len: 64
max_duration: 100ba
optimizer: {name: decoupled_adamw, lr: 1.0e-3}
scheduler:
  name: reduce_lr_on_plateau
  base: {name: warmup_stable_decay, t_warmup: 60ba, t_decay: 0.5dur}
callbacks:
  lr_monitor: {foo: 1}
  speed_monitr: {}
"""


def validate(tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | None, *extra: str) -> tuple[int, str, str]:
    config = tmp_path / "cfg.yaml"
    if text is not None:
        config.write_text(text)
    rc = main(["validate", str(config), *extra])
    captured = capsys.readouterr()
    return rc, captured.out, captured.err


def test_ok_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = validate(tmp_path, capsys, GOOD)
    assert rc == 0, err
    assert out.splitlines()[-1] == (
        "OK: warmup_stable_decay (t_warmup=100ba, t_decay=0.2dur, decay_type=sqrt), max_duration=1000ba, 2 callbacks"
    )


def test_every_problem_in_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = validate(tmp_path, capsys, MANY_PROBLEMS)
    assert rc == 2
    lines = err.strip().splitlines()
    fields = [line.split(": ", 2)[1] for line in lines]  # "<config>: <field>: <problem>"
    assert sorted(fields) == [
        "callbacks.lr_monitor.foo",
        "callbacks.speed_monitr",
        "scheduler.base.t_decay",
        "scheduler.monitor",
    ], err
    assert "did you mean 'speed_monitor'" in err
    assert "60 + 50 > 100 ba" in err  # WSD overlap, found only with max_duration (0.5dur of 100ba)
    assert "no eval_loader" in err
    assert "FAILED: 4 problems" in out
    assert "Traceback" not in err


def test_missing_max_duration_and_scheduler_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = GOOD.replace("max_duration: 1000ba\n", "").replace("scheduler:", "schedular:")
    rc, _, err = validate(tmp_path, capsys, text)
    assert rc == 2
    assert "max_duration: missing" in err and "scheduler: missing" in err
    assert "schedular: unknown key (did you mean 'scheduler'?)" in err  # llm-foundry's own key check (issue 46)
    assert len(err.strip().splitlines()) == 3


def test_unknown_scheduler_lists_close_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = validate(tmp_path, capsys, GOOD, "scheduler.name=cosine_warmup")
    assert rc == 2
    assert "'cosine_with_warmup'" in err and "is not a registered scheduler" in err


def test_overrides_fix_a_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = validate(tmp_path, capsys, GOOD, "max_duration=110ba")
    assert rc == 2 and "scheduler.t_decay" in err
    rc, out, _ = validate(tmp_path, capsys, GOOD, "max_duration=110ba", "scheduler.t_warmup=10ba")
    assert rc == 0 and "max_duration=110ba" in out


def test_plateau_monitor_label_must_match_an_eval_loader(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = GOOD.replace(
        "scheduler: {name: warmup_stable_decay, t_warmup: 100ba, t_decay: 0.2dur, decay_type: sqrt}",
        "scheduler: {name: reduce_lr_on_plateau, monitor: metrics/eval/LanguageCrossEntropy}\n"
        "eval_loader: [{label: c4, name: text, dataset: {local: x, split: val}}]",
    )
    rc, _, err = validate(tmp_path, capsys, text)
    assert rc == 2 and "'eval/c4'" in err
    rc, out, err = validate(tmp_path, capsys, text, "scheduler.monitor=metrics/eval/c4/LanguageCrossEntropy")
    assert rc == 0, err
    assert out.splitlines()[-1].startswith("OK: reduce_lr_on_plateau (monitor=metrics/eval/c4/LanguageCrossEntropy)")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        pytest.param(None, "no such file", id="missing-file"),
        pytest.param("a: [1, 2\n", "invalid YAML", id="invalid-yaml"),
        pytest.param("- 1\n- 2\n", "at the top level", id="not-a-mapping"),
        # issue 46: a TypeError traceback (an int), or each letter of a string imported as a file
        pytest.param("code_paths: 5\n", "code_paths: 5 is not a list of Python files", id="code-paths-int"),
        pytest.param("code_paths: a.py\n", "code_paths: 'a.py' is not a list of Python", id="code-paths-string"),
        pytest.param("code_paths: [1]\n", "code_paths: [1] is not a list of Python", id="code-paths-int-item"),
        pytest.param("code_paths: {a: 1}\n", "code_paths: {'a': 1} is not a list", id="code-paths-mapping"),
    ],
)
def test_unreadable_config_is_one_line(
    text: str | None, needle: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc, _, err = validate(tmp_path, capsys, text)
    assert rc == 2
    assert len(err.strip().splitlines()) == 1 and needle in err and "Traceback" not in err


def test_installed_script_bad_input_in_a_subprocess(tmp_path: Path) -> None:
    script = shutil.which("foundry-ext", path=str(Path(sys.executable).parent))
    assert script is not None
    config = tmp_path / "cfg.yaml"
    config.write_text(GOOD.replace("max_duration: 1000ba\n", ""))
    done = subprocess.run([script, "validate", str(config)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2
    assert "max_duration: missing" in done.stderr and "Traceback" not in done.stderr


def test_a_config_that_is_not_utf8_is_said_in_the_projects_words(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 46: Python's "'utf-8' codec can't decode byte 0xe9 in position 28" stood inside the line."""
    config = tmp_path / "latin1.yaml"
    config.write_bytes("max_duration: 10ba\nname: café\n".encode("latin-1"))
    assert main(["validate", str(config)]) == 2
    err = capsys.readouterr().err
    said = f"{config}: not UTF-8 text (byte 0xe9 at offset 28); a train YAML is UTF-8"
    assert err == f"foundry-ext validate: error: {said}\n"
