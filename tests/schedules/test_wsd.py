"""warmup_stable_decay: hand-checkable multipliers, Hugging Face parity, properties, errors, and a real Trainer."""

from __future__ import annotations

import itertools
import math

import pytest
import torch
from composer.core import State, Time, Timestamp
from composer.devices import DeviceCPU
from hypothesis import given, settings
from hypothesis import strategies as st
from llmfoundry.utils.builders import build_scheduler

from foundry_ext import ConfigError, WarmupStableDecayScheduler
from tests.support.trainer_utils import BASE_LR, make_trainer


def make_state(max_duration: str = "100ba", dataloader_len: int | None = None) -> State:
    state = State(
        model=torch.nn.Linear(1, 1),
        rank_zero_seed=0,
        run_name="test",
        device=DeviceCPU(),
        max_duration=max_duration,
    )
    if dataloader_len is not None:
        state.set_dataloader(list(range(dataloader_len)), "train")
        state.dataloader_len = dataloader_len
    return state


def at(state: State, time: str) -> State:
    t = Time.from_timestring(time)
    state.timestamp = Timestamp(
        **{{"ba": "batch", "tok": "token", "sp": "sample", "ep": "epoch"}[t.unit.value]: int(t.value)}
    )
    return state


WSD = WarmupStableDecayScheduler


@pytest.mark.parametrize(
    "scheduler,times,expected",
    [
        pytest.param(
            WSD(t_warmup="10ba", t_decay="20ba"),
            ["0ba", "5ba", "10ba", "50ba", "80ba", "90ba", "100ba", "150ba"],
            [0.0, 0.5, 1.0, 1.0, 1.0, 0.5, 0.0, 0.0],
            id="linear",
        ),
        pytest.param(
            WSD(t_warmup="10ba", t_decay="20ba", alpha_f=0.1),
            ["0ba", "5ba", "80ba", "90ba", "100ba", "120ba"],
            [0.0, 0.5, 1.0, 0.55, 0.1, 0.1],
            id="linear-floor",
        ),
        pytest.param(
            WSD(t_decay="16ba", decay_type="sqrt"),
            ["0ba", "84ba", "88ba", "96ba", "100ba"],
            [1.0, 1.0, 0.5, 1 - math.sqrt(0.75), 0.0],
            id="sqrt",
        ),
        pytest.param(
            WSD(t_decay="20ba", decay_type="cosine", alpha_f=0.2),
            ["79ba", "80ba", "90ba", "100ba"],
            [1.0, 1.0, 0.6, 0.2],
            id="cosine",
        ),
        pytest.param(
            WSD(t_decay="20ba", decay_type="square"), ["80ba", "90ba", "100ba"], [1.0, 0.75, 0.0], id="square"
        ),
        pytest.param(
            WSD(t_warmup="10ba", warmup_type="cosine", t_decay="0ba"),
            ["0ba", "5ba", "10ba", "99ba", "100ba"],
            [0.0, 0.5, 1.0, 1.0, 0.0],
            id="warmup-cosine",
        ),
        pytest.param(
            WSD(t_warmup="4ba", warmup_type="sqrt", t_decay="0ba"),
            ["0ba", "3ba", "4ba"],
            [0.0, 0.5, 1.0],
            id="warmup-sqrt",
        ),
        pytest.param(
            WSD(t_warmup="10ba", t_decay="20ba", alpha_i=0.2, alpha_f=0.1),
            ["0ba", "5ba", "9ba", "10ba", "90ba", "100ba"],
            [0.2, 0.6, 0.92, 1.0, 0.55, 0.1],
            id="warmup-from-alpha_i",
        ),
        pytest.param(
            WSD(t_warmup="4ba", warmup_type="sqrt", alpha_i=0.5, t_decay="0ba"),
            ["0ba", "3ba", "4ba"],
            [0.5, 0.75, 1.0],
            id="warmup-sqrt-from-alpha_i",
        ),
        pytest.param(
            WSD(t_warmup="0.1dur", t_decay="0.2dur", t_max="1dur"),
            ["5ba", "10ba", "90ba", "100ba"],
            [0.5, 1.0, 0.5, 0.0],
            id="dur",
        ),
        pytest.param(
            WSD(t_warmup="10ba", t_decay="0.2dur", t_max="80ba"),
            ["60ba", "64ba", "70ba", "80ba", "90ba"],
            [1.0, 0.8, 0.5, 0.0, 0.0],
            id="mixed-units-t_max-before-end",
        ),
    ],
)
def test_multiplier_table(scheduler: WSD, times: list[str], expected: list[float]) -> None:
    state = make_state("100ba")
    got = [scheduler(at(state, t)) for t in times]
    assert got == pytest.approx(expected, abs=1e-12)


def test_epochs_convert_to_batches() -> None:
    state = make_state("10ep", dataloader_len=10)  # 100 batches
    s = WSD(t_warmup="1ep", t_decay="2ep")
    assert [s(at(state, t)) for t in ["5ba", "10ba", "80ba", "90ba", "100ba"]] == pytest.approx([0.5, 1, 1, 0.5, 0])


def test_tokens() -> None:
    state = make_state("1000tok")
    s = WSD(t_warmup="100tok", t_decay="0.5dur")
    assert [s(at(state, t)) for t in ["50tok", "500tok", "750tok", "1000tok"]] == pytest.approx([0.5, 1, 0.5, 0])


@pytest.mark.parametrize(
    "ssr,scale_warmup,times,expected",
    [
        # ssr 0.5: max_duration 100ba -> 50ba (the Trainer scales it); t_decay 20ba -> 10ba
        pytest.param(0.5, False, ["5ba", "10ba", "40ba", "45ba", "50ba"], [0.5, 1.0, 1.0, 0.5, 0.0], id="warmup-kept"),
        pytest.param(0.5, True, ["5ba", "10ba", "45ba"], [1.0, 1.0, 0.5], id="warmup-scaled"),
    ],
)
def test_scale_schedule_ratio(ssr: float, scale_warmup: bool, times: list[str], expected: list[float]) -> None:
    state = make_state("50ba")
    s = WSD(t_warmup="10ba", t_decay="20ba", t_max="100ba", scale_warmup=scale_warmup)
    assert [s(at(state, t), ssr) for t in times] == pytest.approx(expected)


@pytest.mark.parametrize("min_lr_ratio", [0.0, 0.1, 0.35])
@pytest.mark.parametrize("decay_type", ["linear", "sqrt", "cosine"])
@pytest.mark.parametrize("warmup_type", ["linear", "cosine", "sqrt"])
def test_matches_hugging_face_wsd(warmup_type: str, decay_type: str, min_lr_ratio: float) -> None:
    """transformers.get_wsd_schedule at every step: min_lr_ratio is alpha_i (warmup start) and alpha_f (floor)."""
    from transformers.optimization import get_wsd_schedule

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    hf_names = {"sqrt": "1-sqrt"}
    hf = get_wsd_schedule(
        opt,
        num_warmup_steps=10,
        num_decay_steps=30,
        num_training_steps=100,
        warmup_type=hf_names.get(warmup_type, warmup_type),
        decay_type=hf_names.get(decay_type, decay_type),
        min_lr_ratio=min_lr_ratio,
    )
    state = make_state("100ba")
    ours = WSD(
        t_warmup="10ba",
        t_decay="30ba",
        warmup_type=warmup_type,
        decay_type=decay_type,
        alpha_i=min_lr_ratio,
        alpha_f=min_lr_ratio,
    )
    for step in range(101):
        assert ours(at(state, f"{step}ba")) == pytest.approx(hf.lr_lambdas[0](step), abs=1e-12), step
    if min_lr_ratio > 0:  # the warmup starts at min_lr_ratio, not at 0
        assert ours(at(state, "0ba")) == hf.lr_lambdas[0](0) == min_lr_ratio


@settings(max_examples=200, deadline=None)
@given(
    warmup=st.integers(0, 50),
    decay=st.integers(0, 50),
    extra=st.integers(1, 100),
    alpha_f=st.floats(0, 1),
    alpha_i=st.floats(0, 1),
    decay_type=st.sampled_from(["linear", "sqrt", "cosine", "square"]),
    warmup_type=st.sampled_from(["linear", "cosine", "sqrt"]),
)
def test_properties(
    warmup: int, decay: int, extra: int, alpha_f: float, alpha_i: float, decay_type: str, warmup_type: str
) -> None:
    t_max = warmup + decay + extra
    state = make_state(f"{t_max + 10}ba")
    s = WSD(
        t_warmup=f"{warmup}ba",
        t_decay=f"{decay}ba",
        t_max=f"{t_max}ba",
        alpha_f=alpha_f,
        alpha_i=alpha_i,
        decay_type=decay_type,
        warmup_type=warmup_type,
    )
    values = [s(at(state, f"{t}ba")) for t in range(t_max + 10)]
    after = values[warmup:]
    assert all(alpha_i <= v <= 1.0 + 1e-12 for v in values[:warmup])
    if warmup:
        assert values[0] == alpha_i
    assert all(alpha_f - 1e-12 <= v <= 1.0 + 1e-12 for v in after)
    assert all(a <= b + 1e-12 for a, b in itertools.pairwise(values[: warmup + 1]))
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(after))
    assert values[t_max] == alpha_f


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"t_decay": "-5ba"}, r"scheduler\.t_decay: '-5ba' must be >= 0"),
        ({"t_decay": "5 bananas"}, r"scheduler\.t_decay: '5 bananas' is not a duration"),
        ({"t_warmup": 10}, r"scheduler\.t_warmup: 10 \(int\) is not a duration"),
        ({"t_max": "10sec"}, r"scheduler\.t_max: .*wall-clock"),
        ({"alpha_f": 1.5}, r"scheduler\.alpha_f: 1\.5 is out of range; expected a number in \[0, 1\]"),
        ({"alpha_f": "low"}, r"scheduler\.alpha_f: 'low' \(str\) is not a number; expected a number in \[0, 1\]"),
        ({"alpha_i": -0.1}, r"scheduler\.alpha_i: -0\.1 is out of range; expected a number in \[0, 1\]"),
        ({"decay_type": "sqr"}, r"scheduler\.decay_type: 'sqr' is not allowed \(did you mean 'sqrt'\?\)"),
        ({"warmup_type": "exp"}, r"scheduler\.warmup_type: 'exp' is not allowed; allowed: linear, cosine, sqrt"),
        ({"decay_tpye": "sqrt"}, r"scheduler\.decay_tpye: unknown key \(did you mean 'decay_type'\?\)"),
        ({"scale_warmup": "yes"}, r"scheduler\.scale_warmup: 'yes' \(str\) is not a boolean; expected true or false"),
        (
            {"t_warmup": "50ba", "t_decay": "60ba", "t_max": "100ba"},
            r"scheduler\.t_decay: warmup and decay do not fit before t_max: t_warmup=50ba, t_decay=60ba, t_max=100ba",
        ),
        ({"t_warmup": "0.5dur", "t_decay": "0.6dur"}, r"do not fit before t_max"),
    ],
)
def test_errors_at_build_time(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build_scheduler("warmup_stable_decay", kwargs)


def test_overlap_with_mixed_units_is_caught_at_first_call() -> None:
    s = WSD(t_warmup="60ba", t_decay="0.5dur")  # cannot be checked until max_duration is known
    with pytest.raises(ConfigError, match=r"t_warmup=60ba, t_decay=0\.5dur, t_max=1dur \(= 60 \+ 50 > 100 ba\)"):
        s(at(make_state("100ba"), "0ba"))


def test_unconvertible_units_are_named() -> None:
    s = WSD(t_warmup="100tok", t_decay="20ba")
    with pytest.raises(ConfigError, match=r"scheduler.t_warmup=100tok \(-> tok\), scheduler.t_decay=20ba \(-> ba\)"):
        s(at(make_state("100ba"), "0ba"))


def test_overlap_error_stops_the_trainer_before_the_first_batch() -> None:
    with pytest.raises(ConfigError, match="do not fit"):
        make_trainer([WSD(t_warmup="30ba", t_decay="0.5dur")], max_duration="40ba")


def test_trainer_lr_follows_the_multiplier_batch_by_batch() -> None:
    """The LR the optimizer really uses at batch k is base_lr * multiplier(k - 1) (k >= 1) and multiplier(0) at 0.

    Composer steps its LambdaLR at the end of batch k - 1, before it advances the timestamp, so the LR of batch k is
    computed at timestamp k - 1. We assert that exact relation for every batch of a real fit.
    """
    s = WSD(t_warmup="4ba", t_decay="10ba", decay_type="sqrt", alpha_f=0.1)
    trainer, recorder = make_trainer([s], max_duration="20ba")
    trainer.fit()
    state = make_state("20ba")
    assert sorted(recorder.lrs) == list(range(20))
    for k, lrs in recorder.lrs.items():
        assert lrs[0] == pytest.approx(BASE_LR * s(at(state, f"{max(k - 1, 0)}ba")), rel=1e-12), k


def test_cooldown_on_demand_from_a_stable_checkpoint(tmp_path) -> None:
    """Train 'forever' (long t_max), save in the stable phase, then resume with an absolute t_max/t_decay.

    The resumed run must decay from the checkpoint on: stable until t_max - t_decay, then the decay curve to alpha_f.
    """
    long = WSD(t_warmup="4ba", t_decay="0ba", t_max="1000ba")
    trainer, _ = make_trainer(
        [long], max_duration="1000ba", save_folder=str(tmp_path), save_interval="16ba", train_size=4000
    )
    trainer.fit(duration="16ba")
    ckpt = tmp_path / "ep0-ba16-rank0.pt"
    assert ckpt.exists(), sorted(p.name for p in tmp_path.iterdir())
    trainer.close()

    cooldown = WSD(t_warmup="4ba", t_decay="10ba", t_max="30ba", decay_type="sqrt")
    resumed, recorder = make_trainer([cooldown], max_duration="30ba", load_path=str(ckpt))
    resumed.fit()
    state = make_state("30ba")
    assert sorted(recorder.lrs) == list(range(16, 30))
    for k in range(16, 30):
        expected = BASE_LR * cooldown(at(state, f"{k - 1}ba"))
        assert recorder.lrs[k][0] == pytest.approx(expected, rel=1e-12), k
    assert recorder.lrs[20][0] == pytest.approx(BASE_LR)  # still stable: decay starts at batch 20
    assert recorder.lrs[29][0] == pytest.approx(BASE_LR * (1 - math.sqrt(8 / 10)))
