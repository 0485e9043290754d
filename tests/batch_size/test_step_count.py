"""``BatchPlan.step_count``: the steps of a ramped run counted from its stages, without listing them (issue 46).

``validate`` and ``plot`` refuse a ramp of more than ``MAX_PREVIEW_STEPS`` steps from this count, before listing
them (a ``max_duration`` of 2**53 tokens listed 2e12 steps: minutes of CPU and gigabytes, found by
tests/catalog/test_fuzz_ramp_fsdp.py), and the torch config transform sizes ``OneCycleLR`` by it.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from foundry_ext.config.durations import parse
from foundry_ext.schedules.batch_size import BatchPlan


@st.composite
def plans(draw: st.DrawFn) -> BatchPlan:
    base = draw(st.sampled_from([1, 2, 4, 8]))
    starts = sorted(draw(st.sets(st.integers(1, 400), max_size=4)))
    sizes = [base, *(base * draw(st.integers(1, 20)) for _ in starts)]
    return BatchPlan((0, *starts), tuple(sizes), draw(st.sampled_from(["none", "sqrt", "linear"])))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    plan=plans(),
    length=st.one_of(
        st.integers(1, 3000).map(lambda n: f"{n}sp"),
        st.integers(1, 300_000).map(lambda n: f"{n}tok"),
        st.integers(0, 300).map(lambda n: f"{n}ba"),
    ),
)
def test_the_count_is_the_number_of_steps_listed(plan: BatchPlan, length: str) -> None:
    """Stages skipped by a large batch, a run ending inside a stage or on its edge: the count is what is listed."""
    max_duration = parse(length)
    assert plan.step_count(max_duration, 128) == len(plan.run_steps(max_duration, 128))


def test_a_huge_run_is_counted_at_once() -> None:
    """2**53 tokens of 128-token samples from 8 to 32 samples a batch: 2,199,023,255,557 steps, counted, not listed."""
    plan = BatchPlan((0, 32, 96), (8, 16, 32), "sqrt")
    # 2**53 / 128 = 2**46 samples: 4 batches of 8 to sample 32, 4 of 16 to 96, then (2**46 - 96) / 32 of 32
    assert plan.step_count(parse("9007199254740992tok"), 128) == 4 + 4 + (2**46 - 96) // 32 == 2_199_023_255_557
