"""Composer's duration rules, repeated without Composer (foundry_ext.config.durations): equal to Composer's own."""

from __future__ import annotations

import itertools

import pytest
import torch
from composer.core import State, Time
from composer.devices import DeviceCPU
from composer.optim.scheduler import _convert_time

from foundry_ext.config.durations import Duration, DurationError, convert, parse

STRINGS = [
    "100ba", "0ba", "3e4tok", "1E3ba", "1.0ba", "0.2dur", "1dur", "1e-3dur", "2ep", "512sp", "100BA", " 100ba ",
    "1_000ba", "+5ba", "-5ba", "2.5ba", "0.5ep", "1.5tok", "10sec", "1h30m", "10iter", "ba", "100", "abc", "5 bananas",
    "infba", "nanba", "1e400ba",
]  # fmt: skip


@pytest.mark.parametrize("text", STRINGS)
def test_parse_equals_composer(text: str) -> None:
    try:
        expected: Time | None = Time.from_timestring(text)
    except (ValueError, TypeError, OverflowError):
        expected = None
    try:
        ours: Duration | None = parse(text)
    except DurationError:
        ours = None
    if expected is None:
        assert ours is None, text
    elif expected.unit.value in ("sec", "iter"):
        assert ours is None, text  # valid Composer times that cannot drive a schedule: refused, with a reason
    else:
        assert ours is not None and (ours.value, ours.unit) == (expected.value, expected.unit.value), text
        assert type(ours.value) is type(expected.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("2.5ba", "batches must be a whole number"),
        ("0.5ep", "epochs must be a whole number"),
        ("10sec", "wall-clock"),
        ("1h30m", "wall-clock"),
        ("10iter", "unit 'iter' is not allowed"),
        ("5 bananas", "not a duration"),
        ("nanba", "not a finite duration"),
    ],
)
def test_refusals_say_why(text: str, message: str) -> None:
    with pytest.raises(DurationError, match=message):
        parse(text)


def _state(max_duration: str, dataloader_len: int | None) -> State:
    state = State(
        model=torch.nn.Linear(1, 1), rank_zero_seed=0, run_name="t", device=DeviceCPU(), max_duration=max_duration
    )
    if dataloader_len is not None:
        state.set_dataloader(list(range(dataloader_len)), "train")
        state.dataloader_len = dataloader_len
    return state


@pytest.mark.parametrize(
    ("max_duration", "dataloader_len"),
    [("100ba", None), ("1000tok", None), ("640sp", None), ("3ep", 17), ("250ba", 17)],
)
def test_convert_equals_composer(max_duration: str, dataloader_len: int | None) -> None:
    state = _state(max_duration, dataloader_len)
    times = ["0.2dur", "0.333dur", "1dur", "7ba", "100tok", "64sp"] + (["2ep", "1ep"] if dataloader_len else [])
    for text, ssr in itertools.product(times, [1.0, 0.5, 0.3, 1.7]):
        expected = _convert_time(text, state, ssr=ssr)
        ours = convert(parse(text), Duration.of(state.max_duration), dataloader_len, ssr)
        assert (ours.value, ours.unit) == (expected.value, expected.unit.value), (text, ssr)


def test_a_composer_time_is_a_duration() -> None:
    assert Duration.of(Time(10, "ba")) == Duration(10, "ba") == parse("10ba")
    assert str(Duration(0.2, "dur")) == "0.2dur" and str(Duration(2_000_000, "tok")) == "2000000tok"


def test_timestamp_of_batch_is_the_timestamp_a_real_fit_trains_each_batch_at() -> None:
    """Composer's order in a real ``Trainer.fit()``: batch b trains with the multiplier at ``timestamp_of_batch(b)``.

    The scheduler's multiplier is ``1 + timestamp``, so the LR each batch trains with names the timestamp it was
    evaluated at; the one function gives it for an int and for a whole array (the pipeline's form) alike.
    """
    import numpy as np

    from foundry_ext.config.durations import timestamp_of_batch
    from tests.support.trainer_utils import BASE_LR, make_trainer

    trainer, recorder = make_trainer([lambda state, ssr=1.0: 1.0 + state.timestamp.batch.value], max_duration="6ba")
    trainer.fit()
    trainer.close()
    evaluated_at = [round(recorder.lrs[b][0] / BASE_LR) - 1 for b in range(6)]
    assert evaluated_at == [0, 0, 1, 2, 3, 4]
    assert evaluated_at == [timestamp_of_batch(b) for b in range(6)]
    assert timestamp_of_batch(np.arange(6, dtype=np.int64)).tolist() == evaluated_at
