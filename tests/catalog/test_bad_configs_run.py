"""Issue 21's corpus: >= 150 bad configs across every scheduler, callback and the optimizer block, >= 30 valid ones.

Each bad config gives ``foundry-ext validate --strict`` exit 2 with a line (an error, or a ``warning:``) naming its YAML
path, and no Python error text. Each valid one, unusual on purpose (configurations Composer's, torch's and
llm-foundry's own tests build, degenerate but legal values), gives exit 0. The run is 40 batches of 4 x 64 tokens.

The bad cases come in families applied to every scheduler by name (an unknown key; every duration key given text,
a fraction of a batch, a negative value, and where the formula needs it positive a value that truncates to 0 batches;
every number key given text, NaN, infinity), then the callbacks and the optimizer block one by one.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from foundry_ext.catalog.registry import SCHEDULE_MODELS
from foundry_ext.cli import main
from foundry_ext.schedules.run_lr import POSITIVE_DURATIONS
from tests.support.configs import tiny_train_config, write_train_yaml

BASE: dict[str, Any] = tiny_train_config(t_warmup="4ba", eval_interval="10ba")

# A minimal valid block of every scheduler by name (checked valid by test_every_minimal_block_is_valid).
MINIMAL: dict[str, dict[str, Any]] = {
    "warmup_stable_decay": {"t_warmup": "4ba"},
    "wsd_periods": {"t_warmup": "2ba", "t_decay": "2ba", "periods": ["20ba", "20ba"]},
    "inverse_sqrt": {"t_warmup": "4ba"},
    "power": {"t_warmup": "4ba"},
    "stages": {"stages": [{"duration": "1dur", "shape": "linear", "end": 0.1}]},
    "step": {"step_size": "4ba"},
    "multistep": {"milestones": ["10ba", "20ba"]},
    "multistep_with_warmup": {"t_warmup": "2ba", "milestones": ["10ba"]},
    "constant": {},
    "linear": {},
    "exponential": {"gamma": 0.9},
    "cosine": {},
    "cosine_with_restarts": {"t_0": "10ba"},
    "polynomial": {"power": 2.0},
    "polynomial_with_warmup": {"t_warmup": "2ba"},
    "constant_with_warmup": {"t_warmup": "2ba"},
    "cosine_with_warmup": {"t_warmup": "2ba"},
    "linear_decay_with_warmup": {"t_warmup": "2ba"},
    "inv_sqrt_with_warmup": {"t_warmup": "2ba", "t_scale": "4ba", "t_cooldown": "4ba"},
    "reduce_lr_on_plateau": {},
    "torch_lr_scheduler": {"type": "StepLR", "step_size": 10},
}


def _sched(name: str, **changes: Any) -> dict[str, Any]:
    block = {"name": name, **MINIMAL[name], **changes}
    return {"scheduler": {k: v for k, v in block.items() if v is not None}}


def _guard(**keys: Any) -> dict[str, Any]:
    return {"callbacks": {"lr_monitor": {}, "checkpoint_guard": keys}}


def _is(annotation: Any, word: str) -> bool:
    return word in str(annotation)


def _families() -> dict[str, tuple[dict[str, Any], str]]:
    cases: dict[str, tuple[dict[str, Any], str]] = {}
    for name, model in SCHEDULE_MODELS.items():
        if name not in MINIMAL:
            continue
        cases[f"{name}-unknown-key"] = (_sched(name, zzz_typo=1), "scheduler.zzz_typo")
        for key, field in model.model_fields.items():
            if key in getattr(model, "hidden_keys", ()) or key == "name":
                continue
            annotation = field.annotation
            if _is(annotation, "Duration") and not _is(annotation, "list"):
                cases[f"{name}-{key}-text"] = (_sched(name, **{key: "abc"}), f"scheduler.{key}")
                cases[f"{name}-{key}-fraction"] = (_sched(name, **{key: "2.5ba"}), f"scheduler.{key}")
                if key in POSITIVE_DURATIONS and name != "reduce_lr_on_plateau":
                    # no warmup or decay to overlap with: the truncation itself is what is refused
                    # (power's warmup must be > 0: its overlap check refuses a 0-batch t_max, naming t_decay)
                    fit = {"t_warmup": "0ba", "t_decay": "0ba"} if name == "warmup_stable_decay" else {}
                    named = "scheduler.t_decay" if name == "power" else f"scheduler.{key}"
                    cases[f"{name}-{key}-zero-batches"] = (_sched(name, **fit, **{key: "0.001dur"}), named)
            elif annotation in (float, int) or (_is(annotation, "float") and not _is(annotation, "list")):
                if field.is_required() and key not in MINIMAL[name]:
                    continue
                cases[f"{name}-{key}-text"] = (_sched(name, **{key: "x"}), f"scheduler.{key}")
                cases[f"{name}-{key}-nan"] = (_sched(name, **{key: math.nan}), f"scheduler.{key}")
    return cases


BAD: dict[str, tuple[dict[str, Any], str]] = {
    **_families(),
    # -- issue 21's run-time cases ------------------------------------------------------------------------------
    "wsd_periods-peak-1e30": (_sched("wsd_periods", peaks=[1, 1e30]), "scheduler"),
    "step-gamma-1e308": (_sched("step", gamma=1e308), "scheduler"),
    "multistep-gamma-huge": (_sched("multistep", gamma=1e5), "scheduler"),
    "exponential-gamma-grows": (_sched("exponential", gamma=2.0, decay_period="1ba"), "scheduler"),
    "cosine_with_warmup-t_max-half": (_sched("cosine_with_warmup", t_max="0.5dur"), "scheduler.t_max"),
    "constant_with_warmup-t_max-10ba": (_sched("constant_with_warmup", t_max="10ba"), "scheduler.t_max"),
    "constant_with_warmup-tok": (_sched("constant_with_warmup", t_warmup="512tok"), "scheduler"),
    "inv_sqrt-t_max-tok": (_sched("inv_sqrt_with_warmup", t_max="20480tok"), "scheduler"),
    # issue 34: the t_max warning says why the LR is 0 for half the run (it was the zero-LR warning, naming scheduler)
    "wsd-ends-at-half": (_sched("warmup_stable_decay", t_warmup="0ba", t_decay="0.25dur", t_max="0.5dur"),
                         "scheduler.t_max"),
    "plateau-base-zero": (_sched("reduce_lr_on_plateau", base={"name": "step", "step_size": "0.001dur"}),
                          "scheduler.base.step_size"),
    "plateau-check-0": (_sched("reduce_lr_on_plateau", monitor="loss/train/total", check_interval="0.001dur"),
                        "scheduler.check_interval"),
    "plateau-check-tok": (_sched("reduce_lr_on_plateau", monitor="loss/train/total", check_interval="1000tok"),
                          "scheduler.check_interval"),
    "plateau-check-long": (_sched("reduce_lr_on_plateau", monitor="loss/train/total", check_interval="41ba"),
                           "scheduler.check_interval"),
    "plateau-eval-long": ({"eval_interval": "50ba", **_sched("reduce_lr_on_plateau")}, "eval_interval"),
    "plateau-min_lr-nan": (_sched("reduce_lr_on_plateau", min_lr=[math.nan]), "scheduler.min_lr[0]"),
    "plateau-factor-1": (_sched("reduce_lr_on_plateau", factor=1.0), "scheduler.factor"),
    "plateau-mode": (_sched("reduce_lr_on_plateau", mode="minimum"), "scheduler.mode"),
    "plateau-patience-neg": (_sched("reduce_lr_on_plateau", patience=-1), "scheduler.patience"),
    "plateau-monitor-typo": (_sched("reduce_lr_on_plateau", monitor="metrics/eval/LanguageCrossEntropi"),
                             "scheduler.monitor"),
    "torch-type-typo": (_sched("torch_lr_scheduler", type="StepLr"), "scheduler.type"),
    "torch-step_size-text": (_sched("torch_lr_scheduler", step_size="x"), "scheduler.step_size"),
    "stages-override-list": (_sched("stages", override_decay=[1]), "scheduler.override_decay"),
    "stages-empty": (_sched("stages", stages=[]), "scheduler.stages"),
    "stages-shape": (_sched("stages", stages=[{"duration": "1dur", "shape": "cube", "end": 0.1}]),
                     "scheduler.stages[0].shape"),
    # -- the optimizer block -------------------------------------------------------------------------------------
    **{
        f"optimizer-lr-{tag}": ({"optimizer": {"name": "decoupled_adamw", "lr": value}}, "optimizer.lr")
        for tag, value in [("nan", math.nan), ("inf", math.inf), ("negative", -1e-3), ("zero", 0), ("text", "abc"),
                           ("bool", True), ("list", [1e-3]), ("none-string", "None")]
    },
    # -- callbacks -----------------------------------------------------------------------------------------------
    **{
        f"guard-quarantine-{tag}": ({"callbacks": {"checkpoint_guard": {"quarantine_folder": value}}},
                                    "callbacks.checkpoint_guard.quarantine_folder")
        for tag, value in [("nul", "q\0x"), ("long", "q" * 300), ("dot", "."), ("dotdot", "../q"), ("abs", "/tmp/q"),
                           ("home", "~/q"), ("url", "s3://b/q"), ("empty", ""), ("space", " q"), ("newline", "q\n")]
    },
    "guard-verify": ({"callbacks": {"checkpoint_guard": {"verify": "crc"}}}, "callbacks.checkpoint_guard.verify"),
    "guard-exit": ({"callbacks": {"checkpoint_guard": {"exit_if_finished": "yes"}}},
                   "callbacks.checkpoint_guard.exit_if_finished"),
    "guard-stale-nan": ({"callbacks": {"checkpoint_guard": {"stale_after": math.nan}}},
                        "callbacks.checkpoint_guard.stale_after"),
    "guard-stale-zero": ({"callbacks": {"checkpoint_guard": {"stale_after": 0}}},
                         "callbacks.checkpoint_guard.stale_after"),
    "guard-heartbeat-neg": ({"callbacks": {"checkpoint_guard": {"heartbeat_interval": -1}}},
                            "callbacks.checkpoint_guard.heartbeat_interval"),
    "guard-heartbeat-vs-stale": ({"callbacks": {"checkpoint_guard": {"stale_after": 10}}},
                                 "callbacks.checkpoint_guard"),
    "guard-unknown": ({"callbacks": {"checkpoint_guard": {"quarantine": "q"}}},
                      "callbacks.checkpoint_guard.quarantine"),
    "guard-not-mapping": ({"callbacks": {"checkpoint_guard": [1]}}, "callbacks.checkpoint_guard"),
    # -- issue 34: the corpus's last cases ---------------------------------------------------------------------
    **{
        f"guard-quarantine-named-{tag}": ({"save_folder": "runs/x", **_guard(quarantine_folder=name)},
                                          "callbacks.checkpoint_guard.quarantine_folder")
        for tag, name in [("latest", "latest-rank0.pt"), ("checkpoint", "ep0-ba10-rank0.pt"),
                          ("nested", "ep0-ba10-rank0.pt/q"), ("pt", "old.pt")]
    },
    "guard-quarantine-named-custom": ({"save_folder": "runs/x", "save_filename": "step{batch}.ckpt",
                                       **_guard(quarantine_folder="step3.ckpt")},
                                      "callbacks.checkpoint_guard.quarantine_folder"),
    **{
        f"guard-save_filename-{suffix}": ({"save_folder": "runs/x",
                                           "save_filename": f"ba{{batch}}-rank{{rank}}.pt.{suffix}", **_guard()},
                                          "save_filename")
        for suffix in ("lz4", "gz", "tar", "zst")
    },
    "guard-without-save_folder": (_guard(), "callbacks.checkpoint_guard"),
    "plateau-min_lr-text": (_sched("reduce_lr_on_plateau", min_lr="abc"), "scheduler.min_lr"),
    "wsd-t_max-before-end": (_sched("warmup_stable_decay", t_max="30ba", t_decay="5ba", alpha_f=0.1),
                             "scheduler.t_max"),
    "power-t_max-before-end": (_sched("power", t_max="0.5dur", alpha_f=0.0), "scheduler.t_max"),
    "plateau-base-wsd-t_max-before-end": (_sched("reduce_lr_on_plateau", base={"name": "warmup_stable_decay",
                                                                                "t_max": "20ba", "alpha_f": 0.1}),
                                          "scheduler.base.t_max"),
    "exponential-gamma-above-1": (_sched("exponential", gamma=1.01, decay_period="10ba"), "scheduler.gamma"),
    "torch-exponentiallr-gamma-above-1": (_sched("torch_lr_scheduler", type="ExponentialLR", step_size=None,
                                                 gamma=1.001), "scheduler.gamma"),
    "plateau-mode-max-on-eval-loss": (_sched("reduce_lr_on_plateau", mode="max"), "scheduler.mode"),
    "plateau-mode-max-on-train-loss": (_sched("reduce_lr_on_plateau", mode="max", monitor="loss/train/total",
                                              check_interval="10ba"), "scheduler.mode"),
    "plateau-mode-min-on-accuracy": (_sched("reduce_lr_on_plateau", monitor="metrics/eval/TokenAccuracy"),
                                     "scheduler.mode"),
    "plateau-callback-without-scheduler": ({"callbacks": {"reduce_lr_on_plateau": {}}},
                                           "callbacks.reduce_lr_on_plateau"),
    "lr_monitor-key": ({"callbacks": {"lr_monitor": {"every": 1}}}, "callbacks.lr_monitor.every"),
    "speed_monitor-typo": ({"callbacks": {"speed_monitor": {"window": 10}}}, "callbacks.speed_monitor.window"),
    "early_stopper-missing": ({"callbacks": {"early_stopper": {"patience": 1}}}, "callbacks.early_stopper.monitor"),
    "callback-typo": ({"callbacks": {"checkpoint_gaurd": {}}}, "callbacks.checkpoint_gaurd"),
    "callbacks-list": ({"callbacks": ["lr_monitor"]}, "callbacks"),
}  # fmt: skip

# Valid, unusual on purpose: each gives exit 0. Many are the constructions of Composer's own scheduler tests
# (tests/optim/test_scheduler.py), torch's (test_optim / lr_scheduler), llm-foundry's (tests/optim).
GOOD: dict[str, dict[str, Any]] = {
    "composer-step": _sched("step", step_size="5ba", gamma=0.5),
    "composer-multistep": _sched("multistep", milestones=["3ba", "6ba"], gamma=0.5),
    "composer-multistep-empty": _sched("multistep", milestones=[]),
    "composer-multistep_with_warmup-empty": _sched("multistep_with_warmup", t_warmup="10ba", milestones=[]),
    "composer-multistep-unsorted": _sched("multistep", milestones=["20ba", "10ba"]),
    "composer-constant-short": _sched("constant", alpha=0.5, t_max="10ba"),
    "composer-linear-half": _sched("linear", alpha_i=1.0, alpha_f=0.5, t_max="0.5dur"),
    "composer-exponential": _sched("exponential", gamma=0.5),
    "composer-exponential-gamma-1": _sched("exponential", gamma=1.0),
    "composer-cosine-short": _sched("cosine", t_max="9ba"),
    "composer-cosine-restarts": _sched("cosine_with_restarts", t_0="5ba", t_mult=1.5),
    "composer-polynomial": _sched("polynomial", power=0.5, t_max="10ba"),
    "composer-polynomial_with_warmup-zero-warmup": _sched("polynomial_with_warmup", t_warmup="0ba"),
    "foundry-constant_with_warmup-0": _sched("constant_with_warmup", t_warmup="0ba"),
    "foundry-cosine_with_warmup-dur": _sched("cosine_with_warmup", t_warmup="0.1dur", alpha_f=0.1),
    "foundry-linear_decay-1dur": _sched("linear_decay_with_warmup", t_warmup="0.5dur", t_max="1dur"),
    "foundry-inv_sqrt-no-cooldown": _sched("inv_sqrt_with_warmup", t_cooldown="0ba"),
    "foundry-inv_sqrt-long-t_max": _sched("inv_sqrt_with_warmup", t_max="100ba"),
    "torch-steplr": _sched("torch_lr_scheduler", type="StepLR", step_size=1, gamma=0.9),
    "torch-exponential": {"scheduler": {"name": "torch_lr_scheduler", "type": "ExponentialLR", "gamma": 0.9}},
    "torch-constant-factor": {"scheduler": {"name": "torch_lr_scheduler", "type": "ConstantLR", "factor": 0.5,
                                            "total_iters": 4}},
    "torch-cosine-tmax-1": {"scheduler": {"name": "torch_lr_scheduler", "type": "CosineAnnealingLR", "T_max": 1}},
    "torch-onecycle": {"scheduler": {"name": "torch_lr_scheduler", "type": "OneCycleLR", "max_lr": 1.0,
                                     "total_steps": 40}},
    "torch-polynomial": {"scheduler": {"name": "torch_lr_scheduler", "type": "PolynomialLR", "total_iters": 4,
                                       "power": 1.0}},
    "wsd-no-warmup-no-decay": _sched("warmup_stable_decay", t_warmup="0ba", t_decay="0ba"),
    "wsd-all-warmup": _sched("warmup_stable_decay", t_warmup="32ba", t_decay="8ba", alpha_f=1.0),
    "wsd-tokens": {"max_duration": "10240tok", **_sched("warmup_stable_decay", t_warmup="1024tok", t_decay="0.2dur")},
    "stages-single-cosine": _sched("stages", stages=[{"duration": "1dur", "shape": "cosine", "end": 0.0}]),
    "plateau-defaults": _sched("reduce_lr_on_plateau"),
    "plateau-train-10ba": _sched("reduce_lr_on_plateau", monitor="loss/train/total", check_interval="10ba"),
    "plateau-train-tok-multiple": _sched("reduce_lr_on_plateau", monitor="loss/train/total",
                                         check_interval="1024tok"),
    "plateau-min_lr-list": _sched("reduce_lr_on_plateau", min_lr=[0.0]),
    "optimizer-lr-large": {"optimizer": {"name": "decoupled_adamw", "lr": 10.0}},
    "optimizer-lr-int": {"optimizer": {"name": "decoupled_adamw", "lr": 1}},
    "guard-nested-quarantine": {"save_folder": "runs/x", **_guard(quarantine_folder="broken/partial")},
    "guard-fast-heartbeat": {"save_folder": "runs/x", **_guard(stale_after=3, heartbeat_interval=0.5)},
    "guard-quarantine-like-a-name": {"save_folder": "runs/x", **_guard(quarantine_folder="pt-quarantine")},
    "guard-save_filename-plain": {"save_folder": "runs/x", "save_filename": "ba{batch}-rank{rank}.pt", **_guard()},
    "wsd-t_max-at-end": _sched("warmup_stable_decay", t_max="40ba"),
    "wsd-t_max-after-end": _sched("warmup_stable_decay", t_max="60ba", alpha_f=0.1),
    "exponential-gamma-below-1": _sched("exponential", gamma=0.999, decay_period="1ba"),
    "plateau-mode-max-on-accuracy": _sched("reduce_lr_on_plateau", mode="max", monitor="metrics/eval/TokenAccuracy"),
}  # fmt: skip

PYTHON_TEXT = re.compile(
    r"Traceback|\b(Type|Value|Key|Attribute|Index|ZeroDivision|Overflow|Recursion|Memory|Runtime|Assertion)Error\b"
    r"|\blist\[|expected\s+or\b"
)


def _config(tmp_path: Path, changes: dict[str, Any]) -> Path:
    return write_train_yaml(tmp_path / "cfg.yaml", BASE, changes)


def test_the_corpus_is_large_and_covers_every_block() -> None:
    assert len(BAD) >= 150 and len(GOOD) >= 30, (len(BAD), len(GOOD))
    named = {changes["scheduler"]["name"] for changes, _ in BAD.values() if "scheduler" in changes}
    assert named == set(MINIMAL)
    assert sum(field.startswith("callbacks") for _, field in BAD.values()) >= 20
    assert sum(field.startswith("optimizer") for _, field in BAD.values()) >= 8


@pytest.mark.parametrize("name", list(MINIMAL))
def test_every_minimal_block_is_valid(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(_config(tmp_path, _sched(name)))]) == 0, capsys.readouterr().err


@pytest.mark.parametrize("case", list(BAD))
def test_bad_config_names_its_yaml_path(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    changes, field = BAD[case]
    config = _config(tmp_path, changes)
    assert main(["validate", str(config), "--strict"]) == 2
    err = capsys.readouterr().err
    lines = [line.removeprefix(f"{config}: ").removeprefix("warning: ") for line in err.splitlines()]
    assert any(line.startswith(f"{field}: ") or line == field for line in lines), err
    assert not PYTHON_TEXT.search(err), err


@pytest.mark.parametrize("case", list(GOOD))
def test_valid_unusual_config_passes(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["validate", str(_config(tmp_path, GOOD[case]))])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert out.splitlines()[-1].startswith("OK: ")


ONE_LINE = ["plateau-min_lr-text", "wsd-t_max-before-end", "power-t_max-before-end", "exponential-gamma-above-1",
            "plateau-mode-max-on-eval-loss", "guard-without-save_folder", "guard-quarantine-named-latest",
            "guard-save_filename-lz4"]  # fmt: skip


@pytest.mark.parametrize("case", ONE_LINE)
def test_one_mistake_is_one_line(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 34's cases: one line each (a string min_lr was two, one per member of ``float | list[float]``)."""
    changes, field = BAD[case]
    config = _config(tmp_path, changes)
    assert main(["validate", str(config), "--strict"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    assert field in err


def test_min_lr_text_names_both_forms(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, BAD["plateau-min_lr-text"][0])
    assert main(["validate", str(config)]) == 2
    assert capsys.readouterr().err == (
        f"{config}: scheduler.min_lr: 'abc' (str) is not a number or a list; expected a number or a list of numbers\n"
    )


def test_t_max_before_the_end_says_what_the_tail_trains_at(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = _config(tmp_path, BAD["wsd-t_max-before-end"][0])
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
    config = _config(tmp_path, {})
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
    config = _config(tmp_path, {})
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
