"""inverse_sqrt, power, wsd_periods, stages: hand-checkable values, OLMo-core's own test values, parity with OLMo-core
and Hugging Face on grids, properties, errors, and the LR a real Composer Trainer gives every batch.

OLMo-core's formulas are ``tests/support/olmo_core_reference.py`` (its code transcribed: OLMo-core needs torch >= 2.10).
Hugging Face's are the installed ``transformers`` functions, called for real.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from composer.core import State, Time, Timestamp
from composer.devices import DeviceCPU
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from llmfoundry.utils.builders import build_scheduler
from omegaconf import OmegaConf as om

import tests.support.olmo_core_reference as olmo
from foundry_ext import ConfigError
from foundry_ext.catalog.registry import validate_block
from foundry_ext.config.durations import Duration
from foundry_ext.schedules.base import ScheduleModel, run_check
from foundry_ext.trainer.schedulers import (
    InverseSqrtScheduler,
    PowerScheduler,
    StagesScheduler,
    WarmupStableDecayScheduler,
    WSDPeriodsScheduler,
)
from tests.support.launcher import REPO
from tests.support.multirank import JSONL_LOGGER, read_metrics
from tests.support.trainer_utils import BASE_LR, make_trainer

InvSqrt = InverseSqrtScheduler
Power = PowerScheduler
Periods = WSDPeriodsScheduler
Stages = StagesScheduler


def make_state(max_duration: str) -> State:
    return State(
        model=torch.nn.Linear(1, 1), rank_zero_seed=0, run_name="test", device=DeviceCPU(), max_duration=max_duration
    )


def at(state: State, time: str | int) -> State:
    t = Time.from_timestring(time if isinstance(time, str) else f"{time}ba")
    unit = {"ba": "batch", "tok": "token", "sp": "sample"}[t.unit.value]
    state.timestamp = Timestamp(**{unit: int(t.value)})
    return state


def values(scheduler: Any, max_duration: str, times: Sequence[str | int]) -> list[float]:
    """The scheduler's multipliers at ``times`` on a real Composer State (what the Trainer calls)."""
    state = make_state(max_duration)
    return [scheduler(at(state, t)) for t in times]


def curve(block: Mapping[str, Any], total: int, unit: str = "ba") -> list[float]:
    """The model's formula at every time 0..total of a run of ``total`` (Composer-free: what plot/validate run)."""
    model = validate_block(block)
    assert isinstance(model, ScheduleModel)
    check = run_check(model, Duration(total, unit), None)
    assert not check.errors, check.errors
    assert check.resolved is not None
    return [model.multiplier(t, check.resolved.values) for t in range(total + 1)]


# -- hand-checkable values ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "scheduler,max_duration,times,expected",
    [
        # inverse_sqrt, tau = t_w = 4: 1 / sqrt(t / 4): 1 at 4, 1/2 at 16, 1/3 at 36
        pytest.param(
            InvSqrt(t_warmup="4ba"), "100ba", [0, 1, 2, 4, 16, 36], [0.0, 0.25, 0.5, 1.0, 0.5, 1 / 3], id="isqrt"
        ),
        pytest.param(
            InvSqrt(t_warmup="4ba", alpha_i=0.2, alpha_f=0.1),
            "100ba",
            [0, 2, 4, 16, 36],
            [0.2, 0.6, 1.0, 0.55, 0.1 + 0.9 / 3],
            id="isqrt-alpha_i-alpha_f",
        ),
        # tau = 2, t_w = 4: 1 / sqrt((t - 2) / 2): 1/2 at 10, 1/3 at 20
        pytest.param(
            InvSqrt(t_warmup="4ba", t_timescale="2ba"), "100ba", [4, 10, 20], [1.0, 0.5, 1 / 3], id="isqrt-timescale"
        ),
        pytest.param(
            InvSqrt(t_warmup="0ba", t_timescale="5ba"), "100ba", [0, 15, 40], [1.0, 0.5, 1 / 3], id="isqrt-no-warmup"
        ),
        pytest.param(InvSqrt(t_warmup="0.1dur"), "40ba", [0, 2, 4, 16], [0.0, 0.5, 1.0, 0.5], id="isqrt-dur"),
        pytest.param(
            InvSqrt(t_warmup="400tok"), "10000tok", ["200tok", "400tok", "1600tok"], [0.5, 1.0, 0.5], id="isqrt-tok"
        ),
        # power, b = -1/2, t_w = 10: (t / 10)^-1/2; tail from 8^-1/2 at 80 to 0 at 100
        pytest.param(
            Power(t_warmup="10ba", b=-0.5, t_decay="20ba"),
            "100ba",
            [0, 5, 10, 40, 79, 80, 90, 100, 120],
            [0.0, 0.5, 1.0, 0.5, 7.9**-0.5, 8**-0.5, 0.5 * 8**-0.5, 0.0, 0.0],
            id="power",
        ),
        pytest.param(
            Power(t_warmup="10ba", b=-1.0, t_decay="0ba", alpha_i=0.1, alpha_f=0.05),
            "100ba",
            [0, 5, 20, 50, 99, 100, 150],
            [0.1, 0.55, 0.5, 0.2, 10 / 99, 0.05, 0.05],
            id="power-no-tail",
        ),
        # default tail: 0.1dur of 100ba = the last 10 batches; alpha_f 0.1 reached at t_max = 100
        pytest.param(
            Power(t_warmup="25ba", b=-0.5, alpha_f=0.1),
            "100ba",
            [25, 90, 95, 100],
            [1.0, (90 / 25) ** -0.5, 0.1 + ((90 / 25) ** -0.5 - 0.1) * 0.5, 0.1],
            id="power-defaults",
        ),
        pytest.param(
            Power(t_warmup="10ba", b=-0.5, t_decay="20ba", t_max="60ba"),
            "100ba",
            [40, 50, 60, 80],
            [0.5, 0.25, 0.0, 0.0],
            id="power-t_max-before-end",
        ),
        # wsd_periods: warmup 2, periods end at 10 and 20, decays over the last 4 of each; the end belongs to the period
        pytest.param(
            Periods(periods=["10ba", "10ba"], t_warmup="2ba", t_decay="4ba"),
            "20ba",
            [0, 1, 2, 5, 6, 8, 10, 11, 16, 18, 20, 25],
            [0.0, 0.5, 1.0, 1.0, 1.0, 0.5, 0.0, 1.0, 1.0, 0.5, 0.0, 0.0],
            id="periods",
        ),
        pytest.param(
            Periods(periods=["10ba", "10ba"], peaks=[1.0, 0.5], t_warmup="2ba", decay_fraction=0.4, alpha_f=0.1),
            "20ba",
            [1, 5, 8, 10, 11, 18, 20, 30],
            [0.5, 1.0, 0.55, 0.1, 0.5, 0.3, 0.1, 0.1],
            id="periods-peaks-fraction",
        ),
        pytest.param(
            Periods(periods=["8ba", "16ba"], decay_fraction=0.5, decay_type="sqrt", alpha_i=0.5, t_warmup="2ba"),
            "24ba",
            [0, 1, 2, 4, 5, 8, 9, 16, 18, 20, 24],
            [0.5, 0.75, 1.0, 1.0, 1 - math.sqrt(0.25), 0.0, 1.0, 1.0, 1 - math.sqrt(0.25), 1 - math.sqrt(0.5), 0.0],
            id="periods-sqrt",
        ),
        pytest.param(
            Periods(periods=["10ba"], t_decay="10ba", decay_type="cosine"),
            "10ba",
            [0, 5, 10],
            [1.0, 0.5, 0.0],
            id="periods-cosine",
        ),
        pytest.param(
            Periods(periods=["10ba"], t_decay="10ba", decay_type="square"),
            "10ba",
            [0, 5, 10],
            [1.0, 0.75, 0.0],
            id="periods-square",
        ),
        pytest.param(
            Periods(periods=["0.5dur", "0.5dur"], t_decay="0ba"),
            "20ba",
            [9, 10, 11, 19, 20],
            [1, 0, 1, 1, 0],
            id="periods-no-decay",
        ),
        # in tokens, with the default t_warmup: 0ba (a zero length is 0 in every unit)
        pytest.param(
            Periods(periods=["1000tok", "1000tok"], t_decay="200tok"),
            "2000tok",
            ["0tok", "800tok", "900tok", "1000tok", "1001tok", "1900tok", "2000tok"],
            [1.0, 1.0, 0.5, 0.0, 1.0, 0.5, 0.0],
            id="periods-tok",
        ),
        # stages: warmup 0 -> 1 over 10, cosine 1 -> 0.1 over 20, then 0.1 holds
        pytest.param(
            Stages(
                stages=[
                    {"duration": "10ba", "start": 0.0, "end": 1.0},
                    {"duration": "20ba", "shape": "cosine", "end": 0.1},
                ]
            ),
            "40ba",
            [0, 5, 10, 20, 30, 40],
            [0.0, 0.5, 1.0, 0.55, 0.1, 0.1],
            id="stages",
        ),
        # the override starts at 15 from wherever the stages are (0.75, half way down stage 2) and reaches 0 at 25
        pytest.param(
            Stages(
                stages=[{"duration": "10ba", "start": 0.0, "end": 1.0}, {"duration": "20ba", "end": 0.5}],
                override_decay={"start": "15ba", "duration": "10ba", "end": 0.0},
            ),
            "40ba",
            [10, 14, 15, 20, 25, 40],
            [1.0, 0.9, 0.875, 0.4375, 0.0, 0.0],
            id="stages-override",
        ),
        pytest.param(
            Stages(stages=[{"duration": "0.5dur", "end": 1.0}, {"duration": "0.5dur", "start": 0.5, "end": 0.0}]),
            "20ba",
            [0, 9, 10, 15, 20],
            [1.0, 1.0, 0.5, 0.25, 0.0],
            id="stages-start-jump-dur",
        ),
    ],
)
def test_multiplier_table(scheduler: Any, max_duration: str, times: list, expected: list[float]) -> None:
    assert values(scheduler, max_duration, times) == pytest.approx(expected, abs=1e-12)


# -- OLMo-core's own tests (src/test/optim/scheduler_test.py), converted to multipliers of initial_lr ------------------


def _seq_linear(t: int, alpha_f: float) -> float:
    """OLMo-core's SequentialScheduler([ConstantWithWarmup(warmup=1000), LinearWithWarmup(warmup=0, alpha_f)])."""
    return t / 1000 if t <= 1000 else 1.0 - (1.0 - alpha_f) * ((t - 1000) / 9000)


def _seq_cosine(t: int, alpha_f: float) -> float:
    """OLMo-core's SequentialScheduler([ConstantWithWarmup(warmup=1000), CosWithWarmup(warmup=0, alpha_f)])."""
    return t / 1000 if t <= 1000 else alpha_f + (1 - alpha_f) * (1 + math.cos(math.pi * (t - 1000) / 9000)) / 2


_PARITY_POINTS = [0, 1, 100, 500, 999, 1_000, 1_001, 2_500, 5_500, 7_500, 9_999, 10_000]


def _parity_row(shape: str, alpha_f: float) -> Any:
    seq = _seq_linear if shape == "linear" else _seq_cosine
    return pytest.param(
        Stages(
            stages=[
                {"duration": "1000ba", "start": 0.0, "end": 1.0},
                {"duration": "9000ba", "shape": shape, "end": alpha_f},
            ]
        ),
        "10000ba",
        _PARITY_POINTS,
        [seq(t, alpha_f) for t in _PARITY_POINTS],
        id=f"test_composable_and_sequential_match_when_t_max_aligns[{shape}-{alpha_f}]",
    )


WSDS_1000 = {"periods": ["1000ba"], "t_warmup": "100ba", "t_decay": "200ba"}


@pytest.mark.parametrize(
    "scheduler,max_duration,times,expected",
    [
        # initial_lr 10, warmup_min_lr 4 -> alpha_i 0.4; alpha_f 0.2; warmup 3000
        pytest.param(
            InvSqrt(t_warmup="3000ba", alpha_i=0.4, alpha_f=0.2),
            "10000ba",
            [0, 1_000, 3_000, 5_000, 10_000],
            [0.4, 0.6, 1.0, 0.2 + 0.8 * math.sqrt(3_000 / 5_000), 0.2 + 0.8 * math.sqrt(3_000 / 10_000)],
            id="test_inv_sqrt_with_warmup",
        ),
        # initial_lr 10, warmup 1000, decay 2000, t_max 10000, b -0.5
        pytest.param(
            Power(t_warmup="1000ba", t_decay="2000ba", b=-0.5),
            "10000ba",
            [0, 500, 1_000, 2_000, 4_000, 6_000, 8_000, 9_000, 10_000],
            [0.0, 0.5, 1.0, 2**-0.5, 4**-0.5, 6**-0.5, 8**-0.5, 8**-0.5 * 0.5, 0.0],
            id="test_power_lr",
        ),
        # initial_lr 10: end_lr 3.0 -> 0.3
        pytest.param(
            Stages(
                stages=[{"duration": "100ba", "start": 0.0, "end": 1.0}, {"duration": "900ba", "end": 0.1}],
                override_decay={"start": "200ba", "duration": "100ba", "end": 0.3},
            ),
            "1000ba",
            [150, 200, 250, 300, 800],
            [0.95, 0.9, 0.6, 0.3, 0.3],
            id="test_composable_scheduler_override_decay_linear",
        ),
        pytest.param(
            Stages(
                stages=[{"duration": "1000ba", "end": 1.0}],
                override_decay={"start": "100ba", "duration": "100ba", "shape": "cosine", "end": 0.2},
            ),
            "1000ba",
            [99, 100, 150, 200, 500],
            [1.0, 1.0, 0.6, 0.2, 0.2],
            id="test_composable_scheduler_override_decay_cosine",
        ),
        _parity_row("linear", 0.0),
        _parity_row("linear", 0.1),
        _parity_row("cosine", 0.0),
        _parity_row("cosine", 0.1),
        # TestWSDSScheduler (initial_lr 1.0). Where OLMo-core asserts 0 < lr < 1, the row holds the exact value.
        pytest.param(
            Periods(**WSDS_1000),
            "1000ba",
            [0, 50, 100, 200, 500, 799, 900, 1000],
            [0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 0.5, 0.0],
            id="TestWSDSScheduler.test_basic_single_period_with_warmup",
        ),
        pytest.param(
            Periods(periods=["1000ba", "1000ba"], t_warmup="100ba", t_decay="200ba"),
            "2000ba",
            [1000, 1001, 1400, 2000],
            [0.0, 1.0, 1.0, 0.0],
            id="TestWSDSScheduler.test_multiple_periods_with_reset",
        ),
        # warmup_fraction=0.1 of the first period is t_warmup = round(0.1 * 1000) = 100ba here
        pytest.param(
            Periods(periods=["1000ba"], t_warmup="100ba", decay_fraction=0.2),
            "1000ba",
            [0, 100, 500, 1000],
            [0.0, 1.0, 1.0, 0.0],
            id="TestWSDSScheduler.test_warmup_fraction",
        ),
        pytest.param(
            Periods(periods=["1000ba"], t_warmup="50ba", decay_fraction=0.3),
            "1000ba",
            [50, 699, 700, 701, 1000],
            [1.0, 1.0, 1.0, 1 - 1 / 300, 0.0],
            id="TestWSDSScheduler.test_decay_fraction",
        ),
        pytest.param(
            Periods(periods=["1000ba", "1000ba"], t_warmup="100ba", t_decay="200ba"),
            "2000ba",
            [1001],
            [1.0],
            id="TestWSDSScheduler.test_no_warmup_in_subsequent_periods",
        ),
        pytest.param(
            Periods(**WSDS_1000), "1000ba", [1001, 5000], [0.0, 0.0], id="TestWSDSScheduler.test_beyond_all_periods"
        ),
        pytest.param(
            Periods(**WSDS_1000, alpha_f=0.1),
            "1000ba",
            [1000, 1500],
            [0.1, 0.1],
            id="TestWSDSScheduler.test_non_zero_decay_min_lr",
        ),
        pytest.param(
            Periods(**WSDS_1000, alpha_i=0.1), "1000ba", [0], [0.1], id="TestWSDSScheduler.test_non_zero_warmup_min_lr"
        ),
        *[
            pytest.param(
                Periods(periods=["1000ba"] * n, t_warmup="100ba", t_decay="200ba"),
                f"{1000 * n}ba",
                [1000 * (i + 1) for i in range(n)],
                [0.0] * n,
                id=f"TestWSDSScheduler.test_variable_period_counts[{n}]",
            )
            for n in (1, 2, 5)
        ],
        *[
            pytest.param(
                Periods(periods=[f"{n}ba"], t_warmup=f"{int(0.1 * n)}ba", t_decay=f"{int(0.2 * n)}ba"),
                f"{n}ba",
                [0, n // 2, n],
                [0.0, 1.0, 0.0],
                id=f"TestWSDSScheduler.test_variable_period_lengths[{n}]",
            )
            for n in (100, 1000, 10000)
        ],
    ],
)
def test_olmo_core_test_values(scheduler: Any, max_duration: str, times: list, expected: list[float]) -> None:
    """Every expected value of OLMo-core's tests of InvSqrtWithWarmup, PowerLR, ComposableScheduler and WSDS."""
    assert values(scheduler, max_duration, times) == pytest.approx(expected, rel=1e-12, abs=1e-15)


@pytest.mark.parametrize(
    "name,kwargs,match",
    [
        # test_power_lr_errors: b must be negative; a warmup is required (its 'warmup_fraction' and 'decay' +
        # 'decay_fraction' cases have no counterpart: one duration key each here)
        ("power", {"t_warmup": "100ba", "t_decay": "100ba", "b": 0.5}, r"scheduler\.b: 0\.5 is out of range; .* < 0"),
        ("power", {"t_decay": "100ba"}, r"scheduler\.t_warmup: is required"),
        # TestWSDSScheduler.test_error_*
        ("wsd_periods", {"periods": [], "t_decay": "1ba"}, r"scheduler\.periods: is empty"),
        ("wsd_periods", {"periods": ["1000ba", "-500ba"], "t_decay": "1ba"}, r"scheduler\.periods\[1\]: '-500ba' must"),
        (
            "wsd_periods",
            {"periods": ["1000ba"], "t_decay": "200ba", "decay_fraction": 0.2},
            r"scheduler\.t_decay: give exactly one of t_decay and decay_fraction \(got both\)",
        ),
        (
            "wsd_periods",
            {"periods": ["1000ba"], "t_warmup": "100ba"},
            r"scheduler\.t_decay: give exactly one of t_decay and decay_fraction \(got neither\)",
        ),
        ("wsd_periods", {"periods": ["1000ba"], "decay_fraction": -0.1}, r"scheduler\.decay_fraction: -0\.1 is out of"),
        (
            "wsd_periods",
            {"periods": ["1000ba"], "t_warmup": "600ba", "t_decay": "500ba"},
            r"scheduler\.t_decay: warmup and decay do not fit in the first period: .*\(= 600 \+ 500 > 1000 batches\)",
        ),
        (
            "wsd_periods",
            {"periods": ["1000ba", "500ba"], "t_warmup": "100ba", "t_decay": "600ba"},
            r"scheduler\.t_decay: the decay \(t_decay=600ba = 600 batches\) is longer than periods\[1\]",
        ),
        # test_composable_scheduler_override_decay_validation
        (
            "stages",
            {"stages": [{"duration": "100ba", "end": 1.0}], "override_decay": {"start": "100ba", "duration": "100ba"}},
            r"scheduler\.override_decay\.end: is required; expected a number >= 0",
        ),
    ],
)
def test_olmo_core_test_errors(name: str, kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build_scheduler(name, kwargs)


# -- parity with OLMo-core's formulas on grids -----------------------------------------------------------------------


def _close(ours: Sequence[float], theirs: Sequence[float]) -> None:
    for t, (a, b) in enumerate(zip(ours, theirs, strict=True)):
        assert a == pytest.approx(b, rel=1e-12, abs=1e-15), t


@settings(max_examples=60, deadline=None)
@given(
    total=st.integers(20, 300),
    warmup=st.integers(1, 100),
    alpha_i=st.sampled_from([0.0, 0.1, 0.5]),
    alpha_f=st.floats(0.0, 0.9),
)
def test_inverse_sqrt_equals_olmo_core(total: int, warmup: int, alpha_i: float, alpha_f: float) -> None:
    ours = curve({"name": "inverse_sqrt", "t_warmup": f"{warmup}ba", "alpha_i": alpha_i, "alpha_f": alpha_f}, total)
    ref = olmo.InvSqrtWithWarmup(alpha_f=alpha_f, warmup=warmup, warmup_min_lr=alpha_i)
    _close(ours, [ref.get_lr(1.0, t, total) for t in range(total + 1)])


@settings(max_examples=60, deadline=None)
@given(
    total=st.integers(30, 300),
    warmup=st.integers(1, 10),
    decay=st.integers(0, 10),
    b=st.sampled_from([-0.51, -0.25, -1.0, -2.0]),
    alpha_i=st.sampled_from([0.0, 0.2]),
    alpha_f=st.sampled_from([0.0, 0.01]),
)
def test_power_equals_olmo_core(total: int, warmup: int, decay: int, b: float, alpha_i: float, alpha_f: float) -> None:
    assume(alpha_f < ((total - decay) / warmup) ** b)  # else an error here (and an assert there)
    block = {"name": "power", "t_warmup": f"{warmup}ba", "t_decay": f"{decay}ba", "b": b}
    ours = curve({**block, "alpha_i": alpha_i, "alpha_f": alpha_f}, total)
    ref = olmo.PowerLR(
        b=b, warmup=warmup, decay=decay, decay_fraction=None, warmup_min_lr=alpha_i, decay_min_lr=alpha_f
    )
    # OLMo-core is only called up to max_steps, and divides by zero at t_max when decay is 0
    last = total if decay > 0 else total - 1
    _close(ours[: last + 1], [ref.get_lr(1.0, t, total) for t in range(last + 1)])


def test_power_default_tail_is_olmo_cores_decay_fraction_where_the_two_roundings_agree() -> None:
    """``t_decay: 0.1dur`` truncates (Composer) where OLMo-core's ``decay_fraction=0.1`` rounds; equal at 1000 steps."""
    ours = curve({"name": "power", "t_warmup": "50ba"}, 1000)
    ref = olmo.PowerLR(warmup=50)
    _close(ours, [ref.get_lr(1.0, t, 1000) for t in range(1001)])


@settings(max_examples=60, deadline=None)
@given(
    periods=st.lists(st.integers(20, 80), min_size=1, max_size=4),
    warmup=st.integers(0, 10),
    decay=st.one_of(
        st.integers(0, 10).map(lambda d: ("t_decay", d)),
        st.sampled_from([("decay_fraction", 0.25), ("decay_fraction", 0.3)]),
    ),
    peaks=st.one_of(st.none(), st.just("varied")),
    alpha_i=st.sampled_from([0.0, 0.1]),
    alpha_f=st.sampled_from([0.0, 0.05]),
)
def test_wsd_periods_equals_olmo_core_wsds(
    periods: list[int], warmup: int, decay: tuple[str, float], peaks: str | None, alpha_i: float, alpha_f: float
) -> None:
    multipliers = [1.0, 0.5, 2.0, 0.75][: len(periods)] if peaks else None
    key, value = decay
    block: dict[str, Any] = {
        "name": "wsd_periods",
        "periods": [f"{p}ba" for p in periods],
        "t_warmup": f"{warmup}ba",
        key: f"{int(value)}ba" if key == "t_decay" else value,
        "peaks": multipliers,
        "alpha_i": alpha_i,
        "alpha_f": alpha_f,
    }
    total = sum(periods) + 10
    ours = curve(block, total)
    ref = olmo.WSDS(
        period_lengths=periods,
        period_lr_multipliers=multipliers,
        warmup=warmup,
        decay=int(value) if key == "t_decay" else None,
        decay_fraction=value if key == "decay_fraction" else None,
        warmup_min_lr=alpha_i,
        decay_min_lr=alpha_f,
    )
    ends = set(itertools.accumulate(periods))
    for t in range(total + 1):
        if key == "t_decay" and value == 0 and t in ends:
            assert ours[t] == alpha_f  # OLMo-core divides by zero here (a decay of length 0)
            continue
        assert ours[t] == pytest.approx(ref.get_lr(1.0, t, total), rel=1e-12, abs=1e-15), t


_STAGE = st.fixed_dictionaries(
    {
        "duration": st.integers(1, 50),
        "shape": st.sampled_from(["linear", "cosine"]),
        "end": st.sampled_from([0.0, 0.1, 0.5, 1.0, 1.5]),
        "start": st.sampled_from([None, 0.0, 0.3]),
    }
)


@settings(max_examples=80, deadline=None)
@given(
    stages=st.lists(_STAGE, min_size=1, max_size=4),
    override=st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {
                "start": st.integers(0, 150),
                "duration": st.integers(1, 50),
                "shape": st.sampled_from(["linear", "cosine"]),
                "end": st.sampled_from([0.0, 0.05]),
            }
        ),
    ),
)
def test_stages_equal_olmo_core_composable_scheduler(stages: list[dict], override: dict | None) -> None:
    block: dict[str, Any] = {
        "name": "stages",
        "stages": [{**s, "duration": f"{s['duration']}ba"} for s in stages],
    }
    if override is not None:
        block["override_decay"] = {
            **override,
            "start": f"{override['start']}ba",
            "duration": f"{override['duration']}ba",
        }
    ours = curve(block, 250)
    ref = olmo.ComposableScheduler(
        stages=[
            olmo.ComposableSchedulerStage(
                s["duration"], s["shape"], start_lr_fraction=s["start"], end_lr_fraction=s["end"]
            )
            for s in stages
        ],
        override_decay=None
        if override is None
        else olmo.OverrideDecay(
            override["start"], override["duration"], override["shape"], end_lr_fraction=override["end"]
        ),
    )
    # bitwise: the same operations in the same order (initial_lr 1.0)
    assert ours == [ref.get_lr(1.0, t, 250) for t in range(251)]


@pytest.mark.parametrize("warmup,decay,alpha_i,alpha_f", [(10, 20, 0.0, 0.0), (1, 30, 0.3, 0.1), (25, 1, 0.1, 0.0)])
def test_warmup_stable_decay_equals_olmo_core_wsd(warmup: int, decay: int, alpha_i: float, alpha_f: float) -> None:
    block = {"name": "warmup_stable_decay", "t_warmup": f"{warmup}ba", "t_decay": f"{decay}ba"}
    ours = curve({**block, "alpha_i": alpha_i, "alpha_f": alpha_f}, 100)
    ref = olmo.WSD(warmup=warmup, decay=decay, decay_fraction=None, warmup_min_lr=alpha_i, decay_min_lr=alpha_f)
    _close(ours, [ref.get_lr(1.0, t, 100) for t in range(101)])


def test_where_olmo_core_differs_by_design() -> None:
    """OLMo-core divides by zero for a decay of length 0 and extends PowerLR's tail past t_max; alpha_f holds here."""
    with pytest.raises(ZeroDivisionError):
        olmo.PowerLR(warmup=10, decay=0, decay_fraction=None, decay_min_lr=0.01).get_lr(1.0, 100, 100)
    assert curve({"name": "power", "t_warmup": "10ba", "t_decay": "0ba", "alpha_f": 0.01}, 100)[100] == 0.01
    tail = olmo.PowerLR(warmup=10, decay=20, decay_fraction=None, decay_min_lr=0.01)
    assert tail.get_lr(1.0, 110, 100) < 0.0  # past max_steps (which OLMo-core's Trainer never reaches)
    assert (
        curve({"name": "power", "t_warmup": "10ba", "t_decay": "20ba", "t_max": "100ba", "alpha_f": 0.01}, 110)[100:]
        == [0.01] * 11
    )
    with pytest.raises(ZeroDivisionError):
        olmo.WSDS(period_lengths=[50, 50], warmup=5, decay=0).get_lr(1.0, 50, 100)
    periods = curve({"name": "wsd_periods", "periods": ["50ba", "50ba"], "t_warmup": "5ba", "t_decay": "0ba"}, 100)
    assert periods[49:52] == [1.0, 0.0, 1.0] and periods[100] == 0.0


# -- parity with Hugging Face ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("warmup,timescale", [(10, None), (10, 25), (1, None), (0, 7), (50, 3), (0, None)])
def test_inverse_sqrt_equals_hugging_face(warmup: int, timescale: int | None) -> None:
    """``transformers.get_inverse_sqrt_schedule`` (alpha_i = alpha_f = 0), bit for bit."""
    from transformers import get_inverse_sqrt_schedule

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    hf = get_inverse_sqrt_schedule(opt, num_warmup_steps=warmup, timescale=timescale)
    block: dict[str, Any] = {"name": "inverse_sqrt", "t_warmup": f"{warmup}ba"}
    if timescale is not None:
        block["t_timescale"] = f"{timescale}ba"
    elif warmup == 0:  # Hugging Face's default time scale without a warmup
        block["t_timescale"] = "10000ba"
    ours = curve(block, 300)
    assert ours == [hf.lr_lambdas[0](t) for t in range(301)]


# -- properties ------------------------------------------------------------------------------------------------------


def _non_increasing(xs: Sequence[float]) -> bool:
    return all(a >= b - 1e-12 for a, b in itertools.pairwise(xs))


def _non_decreasing(xs: Sequence[float]) -> bool:
    return all(a <= b + 1e-12 for a, b in itertools.pairwise(xs))


@settings(max_examples=100, deadline=None)
@given(
    warmup=st.integers(1, 40),
    timescale=st.one_of(st.none(), st.integers(1, 100)),
    alpha_i=st.floats(0, 1),
    alpha_f=st.floats(0, 1),
)
def test_inverse_sqrt_properties(warmup: int, timescale: int | None, alpha_i: float, alpha_f: float) -> None:
    block: dict[str, Any] = {"name": "inverse_sqrt", "t_warmup": f"{warmup}ba", "alpha_i": alpha_i, "alpha_f": alpha_f}
    if timescale is not None:
        block["t_timescale"] = f"{timescale}ba"
    ys = curve(block, 200)
    assert ys[0] == alpha_i and ys[warmup] == 1.0  # starts at alpha_i, reaches 1 exactly where the warmup ends
    assert _non_decreasing(ys[: warmup + 1]) and _non_increasing(ys[warmup:])
    assert all(min(alpha_i, alpha_f) - 1e-12 <= y <= 1.0 for y in ys)
    assert all(y >= alpha_f for y in ys[warmup:])


@settings(max_examples=100, deadline=None)
@given(
    warmup=st.integers(1, 30),
    decay=st.integers(0, 40),
    extra=st.integers(0, 60),
    b=st.floats(-3.0, -0.01),
    alpha_i=st.floats(0, 1),
    alpha_f=st.floats(0, 0.02),
)
def test_power_properties(warmup: int, decay: int, extra: int, b: float, alpha_i: float, alpha_f: float) -> None:
    t_max = warmup + decay + extra + 1
    start = ((t_max - decay) / warmup) ** b
    block = {"name": "power", "t_warmup": f"{warmup}ba", "t_decay": f"{decay}ba", "t_max": f"{t_max}ba", "b": b}
    if alpha_f > start:
        with pytest.raises(ConfigError, match=r"scheduler\.alpha_f: .* is above the multiplier where the tail starts"):
            validate_block({**block, "alpha_f": alpha_f})
        return
    ys = curve({**block, "alpha_i": alpha_i, "alpha_f": alpha_f}, t_max + 10)
    tail = t_max - decay
    assert ys[warmup] == 1.0 and ys[t_max] == alpha_f and set(ys[t_max:]) == {alpha_f}
    assert _non_decreasing(ys[: warmup + 1]) and _non_increasing(ys[warmup:])
    if decay > 0:
        assert ys[tail] == pytest.approx(start, rel=1e-12)  # the tail starts where the power law is: no jump
    assert all(0.0 <= y <= 1.0 for y in ys)


@settings(max_examples=100, deadline=None)
@given(
    periods=st.lists(st.integers(10, 60), min_size=1, max_size=4),
    warmup=st.integers(0, 5),
    decay=st.integers(0, 10),
    peaks=st.lists(st.floats(0.2, 2.0), min_size=4, max_size=4),
    decay_type=st.sampled_from(["linear", "sqrt", "cosine", "square"]),
    alpha_f=st.floats(0, 0.2),
)
def test_wsd_periods_properties(
    periods: list[int], warmup: int, decay: int, peaks: list[float], decay_type: str, alpha_f: float
) -> None:
    assume(warmup + decay <= periods[0])
    peaks = peaks[: len(periods)]
    ys = curve(
        {
            "name": "wsd_periods",
            "periods": [f"{p}ba" for p in periods],
            "peaks": peaks,
            "t_warmup": f"{warmup}ba",
            "t_decay": f"{decay}ba",
            "decay_type": decay_type,
            "alpha_f": alpha_f,
        },
        sum(periods) + 5,
    )
    assert _non_decreasing(ys[: warmup + 1])
    start = 0
    for end, peak in zip(itertools.accumulate(periods), peaks, strict=True):
        first = warmup if start == 0 else start + 1  # the period after the warmup; a period's end belongs to it
        phase = ys[first : end + 1]
        assert _non_increasing(phase) and ys[end] == alpha_f  # decays to alpha_f exactly at its end
        if end - decay >= first:  # a stable phase: the period starts at its peak
            assert phase[0] == pytest.approx(peak, rel=1e-12)
        assert all(alpha_f - 1e-12 <= y <= peak + 1e-12 for y in phase)
        if decay > 0 and end - decay >= first:
            assert ys[end - decay] == pytest.approx(peak, rel=1e-12)  # the decay starts at the peak: no jump
        start = end
    assert set(ys[sum(periods) :]) == {alpha_f}


@settings(max_examples=100, deadline=None)
@given(stages=st.lists(_STAGE, min_size=1, max_size=5))
def test_stages_properties(stages: list[dict]) -> None:
    ys = curve({"name": "stages", "stages": [{**s, "duration": f"{s['duration']}ba"} for s in stages]}, 260)
    t, previous_end = 0, 1.0
    for s in stages:
        start = previous_end if s["start"] is None else s["start"]
        phase = ys[t : t + s["duration"] + 1]  # the stage, and the next stage's first value (or the held end)
        assert ys[t] == pytest.approx(start, abs=1e-12)  # a stage without start continues from the previous end
        assert all(min(start, s["end"]) - 1e-12 <= y <= max(start, s["end"]) + 1e-12 for y in phase[:-1])
        assert (_non_increasing if s["end"] <= start else _non_decreasing)([*phase[:-1], s["end"]])
        t += s["duration"]
        previous_end = s["end"]
    assert set(ys[t:]) == {stages[-1]["end"]}


# -- errors (each names its field) -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,kwargs,match",
    [
        ("inverse_sqrt", {}, r"scheduler\.t_warmup: is required"),
        ("inverse_sqrt", {"t_warmup": "0ba"}, r"scheduler\.t_timescale: is required when the warmup is 0"),
        ("inverse_sqrt", {"t_warmup": "10ba", "t_timescale": "0ba"}, r"scheduler\.t_timescale: '0ba' must be > 0"),
        ("inverse_sqrt", {"t_warmup": "10ba", "alpha_i": 1.5}, r"scheduler\.alpha_i: 1\.5 is out of range; .*\[0, 1\]"),
        ("inverse_sqrt", {"t_warmup": "2.5ba"}, r"scheduler\.t_warmup: '2\.5ba': batches must be a whole number"),
        ("inverse_sqrt", {"t_warmup": "10ba", "t_scale": "5ba"}, r"scheduler\.t_scale: unknown key .*'t_timescale'"),
        ("power", {"t_warmup": "0ba"}, r"scheduler\.t_warmup: '0ba' must be > 0"),
        ("power", {"t_warmup": "10ba", "b": "-0.5"}, r"scheduler\.b: '-0\.5' \(str\) is not a number"),
        (
            "power",
            {"t_warmup": "50ba", "t_decay": "60ba", "t_max": "100ba"},
            r"scheduler\.t_decay: warmup and tail do not fit before t_max: .*\(= 50 \+ 60 > 100 batches\)",
        ),
        (
            "power",
            {"t_warmup": "10ba", "t_decay": "20ba", "t_max": "100ba", "alpha_f": 0.5},
            r"scheduler\.alpha_f: 0\.5 is above the multiplier where the tail starts \(0\.346\d*, at t_max - t_decay",
        ),
        ("wsd_periods", {"t_decay": "1ba"}, r"scheduler\.periods: is required"),
        ("wsd_periods", {"periods": "1000ba", "t_decay": "1ba"}, r"scheduler\.periods: '1000ba' \(str\) is not a list"),
        (
            "wsd_periods",
            {"periods": ["10ba", "10ba"], "peaks": [1.0], "t_decay": "1ba"},
            r"scheduler\.peaks: has 1 value for 2 periods; give one peak per period",
        ),
        ("wsd_periods", {"periods": ["10ba"], "peaks": [0.0], "t_decay": "1ba"}, r"scheduler\.peaks\[0\]: 0\.0 is out"),
        (
            "wsd_periods",
            {"periods": ["10ba", "10ba"], "peaks": [1.0, 0.2], "t_decay": "1ba", "alpha_f": 0.3},
            r"scheduler\.alpha_f: 0\.3 is above peaks\[1\] \(0\.2\): that decay would rise",
        ),
        (
            "wsd_periods",
            {"periods": ["10ba"], "peaks": [0.5], "t_decay": "1ba", "alpha_i": 0.6},
            r"scheduler\.alpha_i: 0\.6 is above peaks\[0\] \(0\.5\): the warmup would fall",
        ),
        (
            "wsd_periods",
            {"periods": ["100ba", "50ba"], "t_warmup": "101ba", "t_decay": "10ba"},
            r"scheduler\.t_warmup: 101ba \(= 101 batches\) is longer than the first period \(periods\[0\]=100ba",
        ),
        (
            "wsd_periods",
            {"periods": ["100ba"], "t_warmup": "60ba", "decay_fraction": 0.5},
            r"scheduler\.decay_fraction: warmup and decay do not fit in the first period",
        ),
        ("wsd_periods", {"periods": ["10ba"], "t_decay": "1ba", "decay_type": "exp"}, r"scheduler\.decay_type: 'exp'"),
        ("stages", {}, r"scheduler\.stages: is required"),
        ("stages", {"stages": []}, r"scheduler\.stages: is empty"),
        ("stages", {"stages": [{"duration": "10ba"}]}, r"scheduler\.stages\[0\]\.end: is required"),
        (
            "stages",
            {"stages": [{"duration": "10ba", "end": 1.0}, {"duration": "10ba", "end": -0.1}]},
            r"scheduler\.stages\[1\]\.end: -0\.1 is out of range; expected a number >= 0",
        ),
        (
            "stages",
            {"stages": [{"duration": "10ba", "end": 1.0, "shape": "step"}]},
            r"scheduler\.stages\[0\]\.shape: 'step' is not allowed; allowed: linear, cosine",
        ),
        (
            "stages",
            {"stages": [{"duration": "10ba", "end": 1.0, "ned": 0}]},
            r"scheduler\.stages\[0\]\.ned: unknown key \(did you mean 'end'\?\); allowed keys: duration, shape, end, "
            "start",
        ),
        (
            "stages",
            {
                "stages": [{"duration": "10ba", "end": 1.0}],
                "override_decay": {"start": "5ba", "duration": "0ba", "end": 0},
            },
            r"scheduler\.override_decay\.duration: '0ba' must be > 0",
        ),
    ],
)
def test_errors_at_build_time(name: str, kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build_scheduler(name, kwargs)


def test_every_problem_of_a_block_at_once() -> None:
    with pytest.raises(ConfigError) as e:
        build_scheduler(
            "stages",
            {"stages": [{"duration": "10ba"}, {"duration": "-1ba", "end": 1.0}], "override_decay": {"start": "1ba"}},
        )
    assert str(e.value).splitlines() == [
        "scheduler.stages[0].end: is required; expected a number >= 0",
        "scheduler.stages[1].duration: '-1ba' must be > 0",
        "scheduler.override_decay.duration: is required; expected a Composer duration > 0, e.g. '100ba', '0.2dur', "
        "'1ep', '2000000tok' or '512sp'",
        "scheduler.override_decay.end: is required; expected a number >= 0",
    ]


@pytest.mark.parametrize(
    "scheduler,max_duration,match",
    [
        # only the run knows these: dur fractions, units that differ
        (Power(t_warmup="0.001dur"), "100ba", r"scheduler\.t_warmup: 0\.001dur is 0 batches in this run"),
        (
            Power(t_warmup="0.5dur", t_decay="60ba"),
            "100ba",
            r"scheduler\.t_decay: warmup and tail do not fit before t_max: .*\(= 50 \+ 60 > 100 batches\)",
        ),
        (
            InvSqrt(t_warmup="0.001dur"),
            "100ba",
            r"scheduler\.t_timescale: is required when the warmup is 0 .*= 0 batch",
        ),
        (
            Periods(periods=["0.5dur", "0.5dur"], t_decay="60ba"),
            "100ba",
            r"scheduler\.t_decay: warmup and decay do not fit in the first period: .*\(= 0 \+ 60 > 50 batches\)",
        ),
        (
            Stages(stages=[{"duration": "0.001dur", "end": 1.0}]),
            "100ba",
            r"scheduler\.stages\[0\]\.duration: 0\.001dur is 0 batches in this run; it must be > 0",
        ),
        (
            Periods(periods=["100tok"], t_decay="10ba"),
            "100ba",
            r"scheduler\.periods\[0\]=100tok \(-> tok\), .*scheduler\.t_decay=10ba \(-> ba\)",
        ),
    ],
)
def test_errors_at_the_first_call(scheduler: Any, max_duration: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        values(scheduler, max_duration, [0])


@pytest.mark.parametrize(
    "block,max_duration,warning",
    [
        (
            {"name": "wsd_periods", "periods": ["40ba", "40ba"], "t_decay": "10ba"},
            "100ba",
            "scheduler.periods: the periods end at 80 batches, before max_duration=100ba (100 batches): the last 20 "
            "batches train at alpha_f (0); add a period or shorten the run",
        ),
        (
            {"name": "wsd_periods", "periods": ["40ba", "40ba"], "t_decay": "10ba"},
            "60ba",
            "scheduler.periods: max_duration=60ba (60 batches) ends inside periods[1], which ends at 80 batches: the "
            "run stops before that period's decay ends (period ends: 40, 80 batches)",
        ),
        (
            {"name": "stages", "stages": [{"duration": "40ba", "end": 0.5}]},
            "100ba",
            "scheduler.stages: the stages end at 40 batches, before max_duration=100ba (100 batches): the last 60 "
            "batches train at 0.5",
        ),
        (
            {
                "name": "stages",
                "stages": [{"duration": "100ba", "end": 1}],
                "override_decay": {"start": "100ba", "duration": "10ba", "end": 0},
            },
            "100ba",
            "scheduler.override_decay.start: 100ba (100 batches) is not before the end of the run (max_duration=100ba "
            "= 100 batches): the override never applies",
        ),
        (
            {"name": "inverse_sqrt", "t_warmup": "200ba"},
            "100ba",
            "scheduler.t_warmup: the warmup (200ba = 200 batches) is longer than the run (max_duration=100ba = 100 "
            "batches): the LR never reaches its peak; shorten t_warmup or raise max_duration",
        ),
    ],
)
def test_suspicious_runs_are_warned_about(block: dict, max_duration: str, warning: str) -> None:
    model = validate_block(block)
    assert model is not None
    check = run_check(model, Duration.of(max_duration), None)
    assert [str(w) for w in check.warnings] == [warning]
    assert not check.errors


@pytest.mark.parametrize(
    "block",
    [
        {"name": "wsd_periods", "periods": ["40ba", "60ba"], "t_decay": "10ba"},  # the run ends with the last period
        {"name": "wsd_periods", "periods": ["40ba", "60ba", "100ba"], "t_decay": "10ba"},  # at a period end: continued
        {"name": "stages", "stages": [{"duration": "0.2dur", "end": 1}, {"duration": "0.8dur", "end": 0}]},
    ],
)
def test_runs_that_fit_are_not_warned_about(block: dict) -> None:
    model = validate_block(block)
    assert model is not None
    assert run_check(model, Duration(100, "ba"), None).warnings == []


def test_scale_schedule_ratio_keeps_the_warmup_unless_scale_warmup() -> None:
    """As Composer's *_with_warmup schedulers: ssr 0.5 halves every duration, the warmup only with scale_warmup."""
    state = make_state("50ba")  # the Trainer has already scaled max_duration (100ba) by ssr
    kept = Power(t_warmup="10ba", b=-0.5, t_decay="20ba", t_max="100ba")
    scaled = Power(t_warmup="10ba", b=-0.5, t_decay="20ba", t_max="100ba", scale_warmup=True)
    assert [kept(at(state, t), 0.5) for t in (5, 10, 40, 45, 50)] == pytest.approx([0.5, 1.0, 0.5, 0.5 * 4**-0.5, 0.0])
    assert [scaled(at(state, t), 0.5) for t in (5, 20, 50)] == pytest.approx([1.0, 0.5, 0.0])
    periods = Periods(periods=["40ba", "60ba"], t_warmup="10ba", t_decay="20ba")
    assert [periods(at(state, t), 0.5) for t in (5, 10, 15, 20, 21, 50)] == pytest.approx([0.5, 1, 0.5, 0, 1, 0])
    # t_timescale 8ba -> 4ba (the warmup is kept): 1 / sqrt((t + 4 - 4) / 4), 1/2 at 16
    isqrt = InvSqrt(t_warmup="4ba", t_timescale="8ba")
    assert [isqrt(at(state, t), 0.5) for t in (2, 4, 16)] == pytest.approx([0.5, 1.0, 0.5])
    # every stage duration and the override are scaled: 20ba -> 10ba, override at 30ba -> 15ba over 10ba -> 5ba
    stages = Stages(
        stages=[{"duration": "20ba", "start": 0.0, "end": 1.0}],
        override_decay={"start": "30ba", "duration": "10ba", "end": 0},
    )
    assert [stages(at(state, t), 0.5) for t in (5, 10, 15, 17, 20)] == pytest.approx([0.5, 1.0, 1.0, 0.6, 0.0])


# -- a real Trainer: the LR of every batch ---------------------------------------------------------------------------

EXAMPLES = {
    "wsd_periods": "tiny-wsd-periods",
    "inverse_sqrt": "tiny-inverse-sqrt",
    "power": "tiny-power",
    "stages": "tiny-stages",
}


def example_block(name: str) -> dict[str, Any]:
    """The scheduler block of the example YAML of ``name``, as llm-foundry's train.py reads it (without ``name``)."""
    block = dict(om.to_container(om.load(REPO / "yamls" / f"{EXAMPLES[name]}.yaml").scheduler))  # type: ignore[arg-type]
    assert block.pop("name") == name
    return block


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_trainer_lr_follows_the_multiplier_batch_by_batch(name: str) -> None:
    """The example YAML's block, built through llm-foundry's registry, in a real 250-batch fit.

    Batch k trains at base_lr * multiplier(k - 1) (batch 0 at multiplier(0)), every batch.
    """
    block = example_block(name)
    trainer, recorder = make_trainer([build_scheduler(name, dict(block))], max_duration="250ba")
    trainer.fit()
    expected = curve({"name": name, **block}, 250)
    assert sorted(recorder.lrs) == list(range(250))
    for k, lrs in recorder.lrs.items():
        assert lrs[0] == pytest.approx(BASE_LR * expected[max(k - 1, 0)], rel=1e-12, abs=1e-15), k
    assert len({round(lr[0], 12) for lr in recorder.lrs.values()}) > 50  # the schedule really moves the LR


# -- per-batch LRs identical to OLMo-core's and Hugging Face's training loops ---------------------------------------


def _composer_batch_lrs(scheduler: Any, batches: int) -> list[float]:
    trainer, recorder = make_trainer([scheduler], max_duration=f"{batches}ba")
    trainer.fit()
    return [recorder.lrs[k][0] / BASE_LR for k in range(batches)]


def test_olmo_core_batches_train_two_steps_ahead_with_the_same_keys() -> None:
    """OLMo-core's batch k trains at get_lr(k + 1), Composer's at alpha(k - 1): same keys -> ours lags by 2 batches."""
    n = 24
    ours = _composer_batch_lrs(Power(t_warmup="4ba", b=-0.5, t_decay="6ba", t_max=f"{n}ba"), n)
    theirs = olmo.olmo_core_batch_lrs(olmo.PowerLR(warmup=4, decay=6, decay_fraction=None, b=-0.5), 1.0, n)
    assert ours[0] == ours[1] == 0.0 and theirs[0] == 0.25  # OLMo-core's first batch is step 1
    for k in range(2, n):
        assert ours[k] == pytest.approx(theirs[k - 2], rel=1e-12, abs=1e-15), k


N = 30


@pytest.mark.parametrize(
    "ours,theirs",
    [
        # warmup W = 6 from 0: t_warmup W - 2, alpha_i 2 / W; t_timescale = W (OLMo-core's time scale)
        pytest.param(
            InvSqrt(t_warmup="4ba", alpha_i=2 / 6, t_timescale="6ba", alpha_f=0.1),
            olmo.InvSqrtWithWarmup(alpha_f=0.1, warmup=6),
            id="inverse_sqrt",
        ),
        pytest.param(
            InvSqrt(t_warmup="0ba", t_timescale="2ba"), olmo.InvSqrtWithWarmup(alpha_f=0.0, warmup=2), id="isqrt-W=2"
        ),
        # warmup from warmup_min_lr 0.2: alpha_i = 0.2 + 2 (1 - 0.2) / 6; decay of 8 ends at t_max - 2
        pytest.param(
            WarmupStableDecayScheduler(
                t_warmup="4ba", alpha_i=0.2 + 2 * 0.8 / 6, t_decay="8ba", t_max=f"{N - 2}ba", alpha_f=0.05
            ),
            olmo.WSD(warmup=6, decay=8, decay_fraction=None, warmup_min_lr=0.2, decay_min_lr=0.05),
            id="warmup_stable_decay",
        ),
        # periods [12, 18]: the first shortened by 2, the warmup too
        pytest.param(
            Periods(
                periods=["10ba", "18ba"], peaks=[1.0, 0.5], t_warmup="2ba", alpha_i=2 / 4, t_decay="5ba", alpha_f=0.1
            ),
            olmo.WSDS(period_lengths=[12, 18], period_lr_multipliers=[1.0, 0.5], warmup=4, decay=5, decay_min_lr=0.1),
            id="wsd_periods",
        ),
        # the first (linear) stage shortened by 2 and started at its value at step 2; the override 2 earlier
        pytest.param(
            Stages(
                stages=[
                    {"duration": "3ba", "start": 0.4, "end": 1.0},
                    {"duration": "20ba", "shape": "cosine", "end": 0.1},
                ],
                override_decay={"start": "16ba", "duration": "6ba", "end": 0.0},
            ),
            olmo.ComposableScheduler(
                stages=[
                    olmo.ComposableSchedulerStage(5, start_lr_fraction=0.0, end_lr_fraction=1.0),
                    olmo.ComposableSchedulerStage(20, "cosine", end_lr_fraction=0.1),
                ],
                override_decay=olmo.OverrideDecay(18, 6, end_lr_fraction=0.0),
            ),
            id="stages",
        ),
    ],
)
def test_identical_per_batch_lrs_as_olmo_core_from_batch_1(ours: Any, theirs: Any) -> None:
    """docs/schedulers.md's recipe: every time 2 steps earlier, a linear warmup started where OLMo-core's is at step 2.

    Every batch but the first then trains with OLMo-core's LR; the first trains with OLMo-core's LR of step 2 (Composer
    trains batches 0 and 1 with the same multiplier, OLMo-core batch 0 with step 1's).
    """
    composer = _composer_batch_lrs(ours, N)
    reference = olmo.olmo_core_batch_lrs(theirs, 1.0, N)
    assert composer[1:] == pytest.approx(reference[1:], rel=1e-12, abs=1e-15)
    assert composer[0] == pytest.approx(theirs.get_lr(1.0, 2, N), rel=1e-12)


def _hugging_face_batch_lrs(scheduler: torch.optim.lr_scheduler.LambdaLR, batches: int) -> list[float]:
    """transformers.Trainer's order (trainer.py, _inner_training_loop): optimizer.step(), then lr_scheduler.step()."""
    optimizer = scheduler.optimizer
    lrs = []
    for _ in range(batches):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return lrs


@pytest.mark.parametrize("kind", ["inverse_sqrt", "wsd"])
def test_identical_per_batch_lrs_as_hugging_face_from_batch_1(kind: str) -> None:
    """HF's batch k trains at lambda(k); with every time 1 step earlier, Composer's batch k >= 1 trains the same."""
    from transformers import get_inverse_sqrt_schedule, get_wsd_schedule

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    if kind == "inverse_sqrt":  # num_warmup_steps 5, timescale 8
        hf = get_inverse_sqrt_schedule(optimizer, num_warmup_steps=5, timescale=8)
        ours: Any = InvSqrt(t_warmup="4ba", alpha_i=1 / 5, t_timescale="8ba")
    else:  # warmup 5 from min_lr_ratio 0.1, 1-sqrt decay over the last 10 of 30 steps
        hf = get_wsd_schedule(
            optimizer,
            num_warmup_steps=5,
            num_decay_steps=10,
            num_training_steps=N,
            decay_type="1-sqrt",
            min_lr_ratio=0.1,
        )
        ours = WarmupStableDecayScheduler(
            t_warmup="4ba", alpha_i=0.1 + 0.9 / 5, t_decay="10ba", t_max=f"{N - 1}ba", decay_type="sqrt", alpha_f=0.1
        )
    reference = _hugging_face_batch_lrs(hf, N)
    composer = _composer_batch_lrs(ours, N)
    assert composer[1:] == pytest.approx(reference[1:], rel=1e-12, abs=1e-15)
    assert composer[0] == pytest.approx(hf.lr_lambdas[0](1), rel=1e-12)


def test_inverse_sqrt_equals_llm_foundrys_inv_sqrt_with_warmup_without_cooldown() -> None:
    """llm-foundry's ``inv_sqrt_with_warmup`` with ``t_cooldown: 0ba`` is ``inverse_sqrt`` (alpha_i 0) in the run."""
    theirs = build_scheduler(
        "inv_sqrt_with_warmup", {"t_warmup": "10ba", "t_scale": "30ba", "t_cooldown": "0ba", "alpha_f_decay": 0.1}
    )
    ours = InvSqrt(t_warmup="10ba", t_timescale="30ba", alpha_f=0.1)
    times = list(range(200))
    assert values(ours, "200ba", times) == pytest.approx(values(theirs, "200ba", times), rel=1e-12, abs=1e-15)


# -- the example YAMLs: foundry-ext plot, and one real `composer train.py` run ---------------------------------------

YAML_LR = 3.0e-3  # optimizer.lr of the tiny examples


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_foundry_ext_plot_prints_the_lr_of_named_batches(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``foundry-ext plot`` on the example: LR of batch b = lr * multiplier(b - 1), as the adapter computes it."""
    from foundry_ext.cli import main

    path = REPO / "yamls" / f"{EXAMPLES[name]}.yaml"
    scheduler = build_scheduler(name, example_block(name))
    batches = [0, 1, 2, 20, 21, 22, 100, 101, 102, 176, 201, 226, 249]
    argv = ["plot", str(path), "--out", str(tmp_path / "lr.png"), *[a for b in batches for a in ("--at", str(b))]]
    assert main(argv) == 0
    printed = {int(b): float(lr) for b, lr in re.findall(r"^batch (\d+): lr (\S+) ", capsys.readouterr().out, re.M)}
    expected = values(scheduler, "250ba", [max(b - 1, 0) for b in batches])
    assert printed == {b: YAML_LR * m for b, m in zip(batches, expected, strict=True)}
    assert (tmp_path / "lr.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_wsd_periods_trains_from_yaml_through_composer_train_py(run_composer: Any, tmp_path: Path) -> None:
    """The stock llm-foundry path: ``composer train.py yamls/tiny-wsd-periods.yaml``, shortened to 2 periods of 16."""
    run_composer(
        REPO / "yamls" / "tiny-wsd-periods.yaml",
        "max_duration=32ba",
        "scheduler.periods=[16ba,16ba]",
        "scheduler.peaks=[1.0,0.5]",
        "scheduler.t_warmup=4ba",
        "scheduler.t_decay=6ba",
        "eval_interval=32ba",
        "save_interval=16ba",
        f"save_folder={tmp_path / 'checkpoints'}",
        f"code_paths=[{JSONL_LOGGER}]",
        f"loggers.jsonl.path={tmp_path / 'metrics.jsonl'}",
        cwd=tmp_path,
        timeout=240,
    )
    lr = read_metrics(tmp_path / "metrics.jsonl", ("lr-DecoupledAdamW/group0",), last=True)["lr-DecoupledAdamW/group0"]
    assert sorted(lr) == list(range(1, 33))  # lr_monitor logs at the end of each batch, at step = batches done
    expected = curve(
        {
            "name": "wsd_periods",
            "periods": ["16ba", "16ba"],
            "peaks": [1.0, 0.5],
            "t_warmup": "4ba",
            "t_decay": "6ba",
            "decay_type": "sqrt",
            "alpha_f": 0.1,
        },
        32,
    )
    for step, value in lr.items():  # the LR of batch step - 1, which trained with the multiplier at step - 1
        assert value == pytest.approx(YAML_LR * expected[step - 1], rel=1e-9, abs=1e-12), step
    assert lr[17] == pytest.approx(YAML_LR * 0.1)  # the first period's decay reached alpha_f at timestamp 16
    assert lr[18] == pytest.approx(YAML_LR * 0.5)  # the second period's peak
    assert (tmp_path / "checkpoints" / "ep0-ba16-rank0.pt").exists()  # the checkpoint at the first period's end
