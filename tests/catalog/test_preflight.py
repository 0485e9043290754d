"""The pre-flight check in real training: ``composer train.py`` stops a bad schedule before anything is built,
and a warmup longer than the run is one warning line when training starts (llm-foundry's own schedulers included).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.launcher import REPO, RunComposer

pytestmark = pytest.mark.slow

TINY_WSD = REPO / "yamls" / "tiny-wsd.yaml"
TINY_RESUME = REPO / "yamls" / "tiny-resume.yaml"


def test_every_problem_stops_the_run_before_the_tokenizer_is_built(run_composer: RunComposer) -> None:
    run = run_composer(
        TINY_WSD, "scheduler.alpha_f=1.5", "scheduler.decay_tpye=sqrt", "callbacks.lr_monitr={}", check=False
    )
    assert run.returncode == 2  # issue 34: the lines, then status 2 without llm-foundry's traceback (RunStopped)
    out = run.output
    assert "Traceback" not in out and "ConfigError" not in out, out[-3000:]
    assert "scheduler.alpha_f: 1.5 is out of range; expected a number in [0, 1]" in out
    assert "scheduler.decay_tpye: unknown key (did you mean 'decay_type'?)" in out
    assert "callbacks.lr_monitr: 'lr_monitr' is not a registered callback (did you mean 'lr_monitor'?)" in out
    assert "Building tokenizer" not in out and "Building train loader" not in out  # llm-foundry's own progress lines


def test_a_monitor_typo_stops_the_run_before_the_model(run_composer: RunComposer) -> None:
    run = run_composer(TINY_RESUME, "scheduler.monitor=metrics/eval/LanguageCrossEntropyy", check=False)
    assert run.returncode != 0
    assert "scheduler.monitor: 'metrics/eval/LanguageCrossEntropyy': mpt_causal_lm reports no" in run.output
    assert "did you mean 'LanguageCrossEntropy'" in run.output
    assert "Building tokenizer" not in run.output


def with_scheduler(tmp_path: Path, block: str) -> Path:
    """yamls/tiny-wsd.yaml with its scheduler block replaced (an override would merge into the WSD block)."""
    text = TINY_WSD.read_text()
    start = text.index("\nscheduler:") + 1
    end = text.index("\n\n", start)
    path = tmp_path / "tiny.yaml"
    path.write_text(text[:start] + f"scheduler: {block}" + text[end:])
    return path


def test_warmup_longer_than_the_run_is_one_warning_line(run_composer: RunComposer, tmp_path: Path) -> None:
    """llm-foundry's own cosine_with_warmup: it trains, and says once that the LR never reaches its peak."""
    config = with_scheduler(tmp_path, "{name: cosine_with_warmup, t_warmup: 20ba}")
    run = run_composer(config, "max_duration=6ba", "eval_interval=6ba", "save_folder=null", timeout=300)
    lines = [line for line in run.output.splitlines() if "longer than the run" in line]
    assert lines == [
        "foundry-ext: warning: scheduler.t_warmup: the warmup (20ba = 20 batches) is longer than the run "
        "(max_duration=6ba = 6 batches): the LR never reaches its peak; shorten t_warmup or raise max_duration"
    ]
