"""Issue 21's corpus: >= 150 bad configs across every scheduler, callback and the optimizer block, >= 30 valid ones.

Each bad config gives ``foundry-ext validate`` exit 2 with a line (an error, or a ``warning:``) that names its YAML
path, and no Python error text. Each valid one, unusual on purpose (configurations Composer's, torch's and
llm-foundry's own tests build, degenerate but legal values), gives exit 0. The run is 40 batches of 4 x 64 tokens.

The bad cases come in families applied to every scheduler by name (an unknown key; every duration key given text,
a fraction of a batch, a negative value, and where the formula needs it positive a value that truncates to 0 batches;
every number key given text, NaN, infinity), then the callbacks and the optimizer block one by one.
"""

from __future__ import annotations

import copy
import math
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from foundry_ext.catalog.registry import SCHEDULE_MODELS
from foundry_ext.cli import main
from foundry_ext.schedules.run_lr import POSITIVE_DURATIONS
from tests.support.configs import tiny_train_config

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
    return {"scheduler": {"name": name, **MINIMAL[name], **changes}}


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
    "wsd-ends-at-half": (_sched("warmup_stable_decay", t_warmup="0ba", t_decay="0.25dur", t_max="0.5dur"), "scheduler"),
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
    "guard-nested-quarantine": {"callbacks": {"checkpoint_guard": {"quarantine_folder": "broken/partial"}}},
    "guard-fast-heartbeat": {"callbacks": {"checkpoint_guard": {"stale_after": 3, "heartbeat_interval": 0.5}}},
}  # fmt: skip

PYTHON_TEXT = re.compile(
    r"Traceback|\b(Type|Value|Key|Attribute|Index|ZeroDivision|Overflow|Recursion|Memory|Runtime|Assertion)Error\b"
    r"|\blist\[|expected\s+or\b"
)


def _config(tmp_path: Path, changes: dict[str, Any]) -> Path:
    cfg = copy.deepcopy(BASE)
    cfg.update(copy.deepcopy(changes))
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


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
    assert main(["validate", str(config)]) == 2
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
