"""``multipliers(t, d)``, each schedule's formula on whole arrays, is bitwise the per-batch ``multiplier(t, d)``.

Every schedule of this package with a formula, over a grid of its keys and every time of a run (before, inside and
after each phase, the boundaries included); then the pipeline's LRs against the per-batch preview, plateau cuts,
the torch engine and tokens as the unit included.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from foundry_ext.catalog.registry import SCHEDULE_MODELS, validate_block
from foundry_ext.config.durations import parse
from foundry_ext.config.errors import ConfigError
from foundry_ext.schedules.base import ScheduleModel, run_check

TOTAL = 997  # batches: odd, so that fractions of the run truncate


def _blocks() -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for warmup, decay, t_w, t_d, a_i, a_f in itertools.product(
        ("linear", "cosine", "sqrt"),
        ("linear", "sqrt", "cosine", "square"),
        ("0ba", "1ba", "97ba", "0.1dur"),
        ("0ba", "1ba", "0.2dur", "0.9dur"),
        (0.0, 0.3),
        (0.0, 0.1),
    ):
        blocks.append(
            dict(
                name="warmup_stable_decay",
                warmup_type=warmup,
                decay_type=decay,
                t_warmup=t_w,
                t_decay=t_d,
                alpha_i=a_i,
                alpha_f=a_f,
            )
        )
    blocks.append(dict(name="warmup_stable_decay", t_warmup="100ba", t_decay="200ba", t_max="800ba", alpha_f=0.05))
    for start in ("100ba", "123ba", "800ba"):  # an anneal branch: the decay from an absolute batch
        blocks.append(
            dict(name="warmup_stable_decay", t_warmup="100ba", t_decay_start=start, t_max="800ba", decay_type="sqrt")
        )
    for b, t_w, t_d, a_i, a_f in itertools.product(
        (-0.51, -1.0, -0.01), ("1ba", "50ba", "0.1dur"), ("0ba", "1ba", "0.1dur"), (0.0, 0.2), (0.0, 0.01)
    ):
        blocks.append(dict(name="power", b=b, t_warmup=t_w, t_decay=t_d, alpha_i=a_i, alpha_f=a_f))
    blocks.append(dict(name="power", t_warmup="10ba", t_decay="100ba", t_max="500ba"))
    for t_w, tau, a_i, a_f in itertools.product(("0ba", "1ba", "77ba"), (None, "1ba", "300ba"), (0.0, 0.5), (0.0, 0.2)):
        if t_w == "0ba" and tau is None:
            continue
        blocks.append(dict(name="inverse_sqrt", t_warmup=t_w, t_timescale=tau, alpha_i=a_i, alpha_f=a_f))
    for decay, t_w, length, peaks, a_f in itertools.product(
        ("linear", "sqrt", "cosine", "square"),
        ("0ba", "30ba"),
        ({"t_decay": "0ba"}, {"t_decay": "40ba"}, {"decay_fraction": 0.25}, {"decay_fraction": 1.0}),
        (None, [1.0, 0.7, 0.5]),
        (0.0, 0.1),
    ):
        if t_w == "30ba" and length.get("decay_fraction") == 1.0:
            continue  # warmup and decay do not fit in the first period
        blocks.append(
            dict(
                name="wsd_periods",
                periods=["300ba", "333ba", "300ba"],
                peaks=peaks,
                t_warmup=t_w,
                decay_type=decay,
                alpha_f=a_f,
                **length,
            )
        )
    stages = [
        {"duration": "100ba", "start": 0.0, "end": 1.0},
        {"duration": "0.3dur", "shape": "cosine", "end": 0.4},
        {"duration": "1ba", "end": 0.9},
        {"duration": "250ba", "shape": "cosine", "start": 0.2, "end": 0.0},
    ]
    for n, override in itertools.product(
        (1, 2, 4),
        (
            None,
            {"start": "0ba", "duration": "1ba", "end": 0.0},
            {"start": "350ba", "duration": "200ba", "end": 0.05, "shape": "cosine"},
            {"start": "0.9dur", "duration": "1000ba", "end": 0.0},
        ),
    ):
        blocks.append(dict(name="stages", stages=stages[:n], override_decay=override))
    for t_w in ("0ba", "1ba", "120ba", "0.5dur"):
        blocks.append(dict(name="reduce_lr_on_plateau", t_warmup=t_w))
    return blocks


def _valid(block: dict[str, Any]) -> bool:
    """Whether the run accepts ``block`` (the grid's combinations the checks reject are left out)."""
    try:
        model = validate_block(block, "scheduler")
    except ConfigError:
        return False
    return model is not None and not run_check(model, parse(f"{TOTAL}ba"), None).errors


BLOCKS = [b for b in _blocks() if _valid(b)]


def resolved(block: dict[str, Any], max_duration: str = f"{TOTAL}ba") -> tuple[ScheduleModel, dict[str, int]]:
    model = validate_block(block, "scheduler")
    assert model is not None
    check = run_check(model, parse(max_duration), None)
    assert not check.errors, check.errors
    assert check.resolved is not None
    return model, check.resolved.values


def assert_bitwise(fast: np.ndarray, slow: list[float]) -> None:
    expected = np.asarray(slow, dtype=np.float64)
    assert fast.dtype == np.float64 and fast.shape == expected.shape
    differ = np.flatnonzero(fast.view(np.int64) != expected.view(np.int64))
    assert differ.size == 0, (
        f"{differ.size} differ, first at {differ[0]}: {fast[differ[0]]!r} != {expected[differ[0]]!r}"
    )


def test_every_schedule_with_a_formula_has_its_own_multipliers_and_is_in_the_grid() -> None:
    formulas = {name for name, m in SCHEDULE_MODELS.items() if m.has_formula and m.kind != "torch"}
    assert formulas == {b["name"] for b in BLOCKS}
    for name in formulas:
        assert "multipliers" in vars(SCHEDULE_MODELS[name]), name


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: " ".join(f"{k}={v}" for k, v in b.items()))
def test_multipliers_equal_the_formula_bitwise(block: dict[str, Any]) -> None:
    model, d = resolved(block)
    t = np.arange(0, TOTAL + 40, dtype=np.int64)  # past the end of the run too
    assert_bitwise(model.multipliers(t, d), [float(model.multiplier(x, d)) for x in t.tolist()])
    shuffled = np.random.default_rng(0).permutation(t)  # any order, any subset
    assert_bitwise(model.multipliers(shuffled[:101], d), [float(model.multiplier(x, d)) for x in shuffled[:101]])
    assert model.multipliers(t[:0], d).shape == (0,)


def test_multipliers_in_tokens_equal_the_formula_bitwise() -> None:
    tokens = 4096 * 2048
    model, d = resolved(
        {
            "name": "warmup_stable_decay",
            "t_warmup": f"{100 * tokens + 7}tok",
            "t_decay": "0.37dur",
            "decay_type": "sqrt",
        },
        f"{TOTAL * tokens}tok",
    )
    t = np.arange(0, TOTAL + 3, dtype=np.int64) * tokens
    assert_bitwise(model.multipliers(t, d), [model.multiplier(x, d) for x in t.tolist()])


def _yaml(tmp_path: Path, scheduler: str, max_duration: str = "1500ba", extra: str = "") -> Path:
    path = tmp_path / "cfg.yaml"
    path.write_text(
        f"max_seq_len: 128\nglobal_train_batch_size: 8\nmax_duration: {max_duration}\n"
        f"optimizer: {{name: decoupled_adamw, lr: 6.0e-4}}\nscheduler: {scheduler}\n{extra}"
    )
    return path


@pytest.mark.parametrize(
    "scheduler",
    [
        "{name: warmup_stable_decay, t_warmup: 100ba, t_decay: 0.3dur, decay_type: cosine, warmup_type: sqrt}",
        "{name: wsd_periods, periods: [500ba, 1000ba], decay_fraction: 0.2, t_warmup: 50ba, decay_type: sqrt}",
        "{name: power, t_warmup: 3000tok, t_decay: 150000tok, t_max: 1400000tok}",
        "{name: reduce_lr_on_plateau, patience: 1, t_warmup: 10ba, base: {name: stages, stages: "
        "[{duration: 700ba, shape: cosine, end: 0.1}]}}",
        "{name: torch_lr_scheduler, type: CosineAnnealingLR, T_max: 700}",
        "{name: cosine_with_warmup, t_warmup: 10ba, alpha_f: 0.1}",
    ],
    ids=lambda s: s.split(",")[0].removeprefix("{name: "),
)
def test_the_pipeline_equals_the_per_batch_preview(tmp_path: Path, scheduler: str) -> None:
    from foundry_ext.preview.pipeline import LRPipeline

    pipeline = LRPipeline.from_yaml(str(_yaml(tmp_path, scheduler)))
    if pipeline.plateau:  # a metric that stalls from batch 300: cuts at evaluations 400 and 500
        pipeline = pipeline.with_metrics([(b, max(3.0 - b / 100, 0.0) + 1.0) for b in range(100, 1501, 100)])
        assert len(pipeline.cuts) >= 2
    lrs = pipeline.lrs()
    assert len(lrs) == pipeline.total == 1500
    assert_bitwise(lrs, [pipeline.lr_of(b) for b in range(1500)])
    assert_bitwise(pipeline.lrs(1234, 1300), [pipeline.lr_of(b) for b in range(1234, 1300)])  # from a resumed batch
    assert_bitwise(pipeline.lrs_at([1499, 0, 700, 1]), [pipeline.lr_of(b) for b in (1499, 0, 700, 1)])


def test_pipeline_errors(tmp_path: Path) -> None:
    from foundry_ext.preview.pipeline import BatchesPerEpochNeeded, LRPipeline

    wsd = "{name: warmup_stable_decay, t_warmup: 10ba}"
    with pytest.raises(BatchesPerEpochNeeded):
        LRPipeline.from_yaml(str(_yaml(tmp_path, wsd, "2ep")))
    assert LRPipeline.from_yaml(str(_yaml(tmp_path, wsd, "2ep")), batches_per_epoch=30).total == 60
    with pytest.raises(ConfigError, match=r"scheduler\.name: 'wsd' is not a registered scheduler"):
        LRPipeline.from_yaml(str(_yaml(tmp_path, "{name: wsd}")))
    with pytest.raises(ConfigError, match="--metrics is only for reduce_lr_on_plateau, not 'warmup_stable_decay'"):
        LRPipeline.from_yaml(str(_yaml(tmp_path, wsd)), metrics=[(10, 1.0)])
    no_lr = tmp_path / "nolr.yaml"
    no_lr.write_text(f"max_duration: 100ba\nscheduler: {wsd}\n")
    assert LRPipeline.from_yaml(str(no_lr)).base_lr == 1.0
    with pytest.raises(ConfigError, match=r"optimizer\.lr: missing; the law needs the LR itself"):
        LRPipeline.from_yaml(str(no_lr), require_lr=True)
