import math

import pytest

from foundry_ext.trainer.spike_guard.rule import SpikeRule, mean_std, olmo_core_rule, z_score


def test_mean_std_is_bessel() -> None:
    assert mean_std([1.0, 2.0, 3.0, 4.0]) == (2.5, pytest.approx(math.sqrt(5 / 3)))


@pytest.mark.parametrize(
    ("value", "mean", "std", "z"),
    [(4.0, 2.0, 1.0, 2.0), (1.0, 2.0, 0.5, -2.0), (3.0, 3.0, 0.0, 0.0), (3.1, 3.0, 0.0, math.inf)],
)
def test_z_score(value: float, mean: float, std: float, z: float) -> None:
    assert z_score(value, mean, std) == z


def test_no_z_skip_before_min_history_but_non_finite_always() -> None:
    rule = SpikeRule(threshold=6, window=8, min_history=4)
    assert [rule.step(x, batch=i).skip for i, x in enumerate([1.0, 1.1, 100.0])] == [False, False, False]
    assert rule.step(math.nan, batch=3).skip
    assert rule.step(1.0, math.inf, batch=4).reason == "non-finite"
    assert list(rule.losses) == [1.0, 1.1, 100.0]


def test_skip_above_threshold_keeps_only_accepted_steps() -> None:
    rule = SpikeRule(threshold=3, window=4, min_history=4)
    for i, x in enumerate([1.0, 2.0, 1.0, 2.0]):
        assert not rule.step(x, batch=i).skip
    # mean 1.5, s = sqrt(1/3) = 0.57735: 3 s = 1.732; 3.2 is 1.7 above the mean: kept; 3.3 skipped
    assert not rule.decide(3.2).skip
    d = rule.step(3.3, batch=4)
    assert d.skip and d.reason == "loss" and d.z == pytest.approx(1.8 / math.sqrt(1 / 3))
    assert list(rule.losses) == [1.0, 2.0, 1.0, 2.0]
    assert (rule.skips, rule.consecutive, rule.first_skip_batch) == (1, 1, 4)
    rule.step(1.5, batch=5)
    assert (rule.skips, rule.consecutive, rule.first_skip_batch) == (1, 0, None)
    assert list(rule.losses) == [2.0, 1.0, 2.0, 1.5]  # the window holds 4


def test_grad_norm_alone_skips() -> None:
    rule = SpikeRule(threshold=3, window=4, min_history=4)
    for i, (x, g) in enumerate([(1.0, 1.0), (1.0, 2.0), (1.0, 1.0), (1.0, 2.0)]):
        rule.step(x + i * 0.01, g, batch=i)
    d = rule.decide(1.0, 10.0)
    assert d.skip and d.reason == "grad_norm"


def test_stop_after_max_skips_or_above_ceiling() -> None:
    rule = SpikeRule(threshold=3, window=4, min_history=4, max_skips=2, ceiling=50.0)
    for i, x in enumerate([1.0, 2.0, 1.0, 2.0]):
        rule.step(x, batch=i)
    rule.step(20.0, batch=4)
    assert rule.stop_reason(20.0) is None
    rule.step(20.0, batch=5)
    assert rule.stop_reason(20.0) == "2 consecutive skips (max_skips 2)"
    assert rule.stop_reason(60.0) == "loss 60 is above ceiling 50"
    assert rule.first_skip_batch == 4


def test_state_dict_round_trip_decides_the_same() -> None:
    a = SpikeRule(threshold=2, window=5, min_history=3)
    seq = [1.0, 1.2, 0.9, 5.0, 1.1, 1.0, 7.0, 7.0, 1.05]
    for i, x in enumerate(seq[:5]):
        a.step(x, batch=i)
    b = SpikeRule(threshold=2, window=5, min_history=3)
    b.load_state_dict(a.state_dict())
    assert [a.step(x, batch=i) for i, x in enumerate(seq[5:])] == [b.step(x, batch=i) for i, x in enumerate(seq[5:])]


def test_olmo_core_rule_keeps_skipped_steps_in_its_window() -> None:
    # a burst: OLMo-core's window takes the first spike in, its threshold widens, the later spikes pass
    losses = [1.0 + 0.01 * (i % 3) for i in range(8)] + [5.0, 5.0, 5.0]
    olmo = olmo_core_rule(losses, threshold=3, window=8)
    rule = SpikeRule(threshold=3, window=8, min_history=4)
    ours = [rule.step(x, batch=i).skip for i, x in enumerate(losses)]
    assert ours[-3:] == [True, True, True]
    assert olmo[-3:] == [True, False, False]
