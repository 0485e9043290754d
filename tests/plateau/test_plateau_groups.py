"""reduce_lr_on_plateau with several param groups: each group stops at its own ``min_lr``, exactly as torch's does.

torch's own ReduceLROnPlateau cases (``test/optim/test_lrscheduler.py``, ``test_reduce_lr_on_plateau1`` ..
``test_reduce_lr_on_plateau8``, pytorch/pytorch at 01f9ef32) run here through a real Composer ``Trainer`` with two
param groups, as in torch's ``setUp`` (both at LR 0.5). Each evaluation of torch's list is one evaluation of the run;
the LR the optimizer really uses for every batch is compared with torch's literal targets (torch's own tolerance,
1e-5) and with the real ``torch.optim.lr_scheduler.ReduceLROnPlateau`` stepped with the same values (1e-12).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from composer import Trainer
from hypothesis import given, settings
from hypothesis import strategies as st

from foundry_ext import ConfigError
from foundry_ext.checkpoint import load_checkpoint_safely
from foundry_ext.schedules.plateau_rule import PlateauRule, PlateauState
from foundry_ext.trainer.plateau.scheduler import ReduceLROnPlateauScheduler
from tests.support.launcher import REPO
from tests.support.multirank import JSONL_LOGGER, launch_and_wait, read_metrics
from tests.support.trainer_utils import LRRecorder, make_trainer

MONITOR = "metrics/eval/Scripted"
INTERVAL = 2  # batches between evaluations

# (id, evaluations checked, torch's targets per group, metrics, kwargs): copied from torch's test file
TORCH_CASES = [
    (
        "plateau1",
        10,
        [[0.5] * 20],
        [10 - i * 0.0167 for i in range(20)],
        {"threshold_mode": "abs", "mode": "min", "threshold": 0.01, "patience": 5, "cooldown": 5},
    ),
    (
        "plateau2",
        22,
        [[0.5] * 6 + [0.05] * 7 + [0.005] * 7 + [0.0005] * 2],
        [10 - i * 0.0165 for i in range(22)],
        {"patience": 5, "cooldown": 0, "threshold_mode": "abs", "mode": "min", "threshold": 0.1},
    ),
    (
        "plateau3",
        22,
        [[0.5] * (2 + 6) + [0.05] * (5 + 6) + [0.005] * 4],
        [-0.8] * 2 + [-0.234] * 20,
        {"mode": "max", "patience": 5, "cooldown": 5, "threshold_mode": "abs"},
    ),
    (
        "plateau4",
        20,
        [[0.5] * 20],
        [1.5 * (1.025**i) for i in range(20)],
        {"mode": "max", "patience": 3, "threshold_mode": "rel", "threshold": 0.1},
    ),
    (
        "plateau5",
        20,
        [[0.5] * 6 + [0.05] * (5 + 6) + [0.005] * 4],
        [1.5 * (1.005**i) for i in range(20)],
        {"mode": "max", "threshold_mode": "rel", "threshold": 0.1, "patience": 5, "cooldown": 5},
    ),
    (
        "plateau6",
        20,
        [[0.5] * 20],
        [1.5 * (0.85**i) for i in range(20)],
        {"mode": "min", "threshold_mode": "rel", "threshold": 0.1},
    ),
    (
        "plateau7",
        20,
        [[0.5] * 6 + [0.05] * (5 + 6) + [0.005] * 4],
        [1] * 7 + [0.6] + [0.5] * 12,
        {"mode": "min", "threshold_mode": "rel", "threshold": 0.1, "patience": 5, "cooldown": 5},
    ),
    (
        "plateau8",
        20,
        [[0.5] * 6 + [0.4] * 14, [0.5] * 6 + [0.3] * 14],
        [1.5 * (1.005**i) for i in range(20)],
        {"mode": "max", "threshold_mode": "rel", "min_lr": [0.4, 0.3], "threshold": 0.1, "patience": 5, "cooldown": 5},
    ),
]


def torch_group_lrs(values: list[float], base_lrs: list[float], **kwargs: Any) -> list[list[float]]:
    """The LR of every param group after each evaluation, from the real torch ReduceLROnPlateau."""
    params = [torch.nn.Parameter(torch.zeros(1)) for _ in base_lrs]
    opt = torch.optim.SGD([{"params": [p], "lr": lr} for p, lr in zip(params, base_lrs, strict=True)])
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
    out = []
    for v in values:
        sched.step(v)
        out.append([g["lr"] for g in opt.param_groups])
    return out


def two_group_trainer(
    scheduler: Any, values: list[float], evaluations: int, base_lrs: tuple[float, float] = (0.5, 0.5), **kwargs: Any
) -> tuple[Trainer, LRRecorder]:
    """A real Trainer whose optimizer has two param groups (the weight and the bias of a linear layer)."""
    return make_trainer(
        [scheduler],
        eval_values=values,
        eval_interval=f"{INTERVAL}ba",
        max_duration=f"{INTERVAL * evaluations}ba",
        optimizer=lambda model: torch.optim.SGD(
            [{"params": [model.net.weight], "lr": base_lrs[0]}, {"params": [model.net.bias], "lr": base_lrs[1]}]
        ),
        **kwargs,
    )


@pytest.mark.parametrize(("evaluations", "targets", "metrics", "kwargs"), [c[1:] for c in TORCH_CASES],
                         ids=[c[0] for c in TORCH_CASES])  # fmt: skip
def test_torch_reduce_lr_on_plateau_cases_through_the_trainer(
    evaluations: int, targets: list[list[float]], metrics: list[float], kwargs: dict[str, Any]
) -> None:
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR, **kwargs)
    trainer, recorder = two_group_trainer(scheduler, metrics[:evaluations], evaluations)
    trainer.fit()
    reference = torch_group_lrs(metrics[:evaluations], [0.5, 0.5], **kwargs)
    # batch k trains with the LR decided by the evaluations before it: evaluation i runs after INTERVAL * (i + 1)
    for k, lrs in recorder.lrs.items():
        done = k // INTERVAL
        for g, lr in enumerate(lrs):
            want = 0.5 if done == 0 else reference[done - 1][g]
            assert lr == pytest.approx(want, rel=1e-12), (k, g)
            if done and g < len(targets):
                assert abs(lr - targets[g][done - 1]) <= 1e-5, (k, g)  # torch's own assertion, on its own targets
    # the last evaluation's decision: the LR the optimizer holds for the batch after the run
    final = [group["lr"] for group in trainer.state.optimizers[0].param_groups]
    assert final == pytest.approx(reference[-1], rel=1e-12)
    for g, target in enumerate(targets):
        assert abs(final[g] - target[evaluations - 1]) <= 1e-5


group_params = st.integers(2, 3).flatmap(
    lambda n: st.fixed_dictionaries(
        {
            "base_lrs": st.lists(st.sampled_from([0.5, 0.1, 0.05, 1e-3]), min_size=n, max_size=n),
            "min_lr": st.one_of(
                st.sampled_from([0.0, 1e-3, 0.02]),
                st.lists(st.sampled_from([0.0, 1e-4, 1e-3, 0.02, 0.3]), min_size=n, max_size=n),
            ),
            "mode": st.sampled_from(["min", "max"]),
            "factor": st.sampled_from([0.1, 0.5, 0.8]),
            "patience": st.integers(0, 3),
            "threshold_mode": st.sampled_from(["rel", "abs"]),
            "cooldown": st.integers(0, 2),
            "eps": st.sampled_from([1e-8, 1e-3]),
        }
    )
)


@settings(max_examples=300, deadline=None)
@given(params=group_params, values=st.lists(st.integers(1, 6).map(float), min_size=1, max_size=50))
def test_rule_matches_torch_per_group_for_random_sequences(params: dict, values: list[float]) -> None:
    base_lrs = params.pop("base_lrs")
    expected = torch_group_lrs(values, base_lrs, **params)
    rule, state = PlateauRule(**params), PlateauState()
    for i, value in enumerate(values):
        rule.step(state, value, base_lrs)
        got = [b * s for b, s in zip(base_lrs, state.scales(len(base_lrs)), strict=True)]
        assert got == pytest.approx(expected[i], rel=1e-12), (i, values[: i + 1])


def test_plateau8_groups_stop_at_their_own_min_lr() -> None:
    """torch's test_reduce_lr_on_plateau8 in numbers: one cut, group 0 floored at 0.4, group 1 at 0.3."""
    *_, metrics, kwargs = TORCH_CASES[7]
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR, **kwargs)
    trainer, recorder = two_group_trainer(scheduler, metrics, 20)
    trainer.fit()
    # evaluations 1-6 at batches 2..12; the cut is decided by the 7th (after batch 13) and applies from batch 14
    assert recorder.lrs[13] == [0.5, 0.5]
    assert recorder.lrs[14] == pytest.approx([0.4, 0.3], rel=1e-15)
    assert recorder.lrs[39] == pytest.approx([0.4, 0.3], rel=1e-15)
    plateau = scheduler.callback.plateau
    assert plateau.group_scales == pytest.approx([0.8, 0.6], rel=1e-15) and plateau.scale == plateau.group_scales[0]
    assert plateau.cuts == 1  # later cuts change no group by more than eps: skipped, as torch skips them


def test_groups_with_different_base_lrs_and_one_min_lr() -> None:
    """torch floors each group's absolute LR: with base LRs 0.5 and 0.05 and min_lr 0.01 they floor at 0.01 each."""
    values = [1.0] * 12
    kwargs = {"mode": "min", "factor": 0.5, "patience": 0, "min_lr": 0.01}
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR, **kwargs)
    trainer, recorder = two_group_trainer(scheduler, values, 12, base_lrs=(0.5, 0.05))
    trainer.fit()
    reference = torch_group_lrs(values, [0.5, 0.05], **kwargs)
    for k, lrs in recorder.lrs.items():
        done = k // INTERVAL
        assert lrs == pytest.approx([0.5, 0.05] if done == 0 else reference[done - 1], rel=1e-12), k
    assert reference[-1] == pytest.approx([0.01, 0.01])  # group 1 reached its floor at the 3rd cut, group 0 at the 6th


def test_checkpoint_holds_one_scale_per_group_and_resume_continues_exactly(tmp_path: Path) -> None:
    *_, metrics, kwargs = TORCH_CASES[7]
    full = ReduceLROnPlateauScheduler(monitor=MONITOR, **kwargs)
    trainer, full_lrs = two_group_trainer(full, metrics, 20)
    trainer.fit()

    first = ReduceLROnPlateauScheduler(monitor=MONITOR, **kwargs)
    trainer, _ = two_group_trainer(first, metrics, 20, save_folder=str(tmp_path), save_interval="20ba")
    trainer.fit(duration="20ba")  # the cut was at batch 14: the checkpoint at batch 20 holds diverged groups
    saved = trainer.state.state_dict()["callbacks"]["ReduceLROnPlateauCallback"]
    trainer.close()
    assert saved["plateau"]["group_scales"] == pytest.approx([0.8, 0.6], rel=1e-15)
    assert saved["plateau"]["scale"] == saved["plateau"]["group_scales"][0]
    # LambdaLR saves None for plain functions: the per-group functions add nothing to the scheduler state
    assert trainer.state.state_dict()["schedulers"]["LambdaLR"]["lr_lambdas"] == [None, None]

    second = ReduceLROnPlateauScheduler(monitor=MONITOR, **kwargs)
    trainer, resumed = two_group_trainer(second, metrics[10:], 20, load_path=str(tmp_path / "ep1-ba20-rank0.pt"))
    trainer.fit()
    assert second.callback.plateau == full.callback.plateau
    assert resumed.lrs == {k: v for k, v in full_lrs.lrs.items() if k >= 20}  # bitwise, both groups


def test_old_checkpoint_with_one_scale_applies_it_to_every_group() -> None:
    state = PlateauState.from_dict(
        {"best": 1.0, "num_bad_evals": 0, "cooldown_counter": 0, "scale": 0.5, "cuts": 1, "last_value": 1.0,
         "num_evals": 3}
    )  # fmt: skip
    assert state.scales(2) == [0.5, 0.5] and state.group_scales is None
    cut = PlateauRule(factor=0.5, patience=0, min_lr=[0.0, 0.2]).step(state, 2.0, [1.0, 1.0])
    assert cut is not None and state.group_scales == [0.25, 0.25]
    cut = PlateauRule(factor=0.5, patience=0, min_lr=[0.0, 0.2]).step(state, 2.0, [1.0, 1.0])
    assert cut is not None and state.group_scales == [0.125, 0.2]
    assert "group_scales" not in PlateauState(scale=0.5).to_dict()  # one group: the checkpoint format of before


def test_one_group_checkpoint_format_is_unchanged() -> None:
    rule, state = PlateauRule(factor=0.5, patience=0), PlateauState()
    rule.step(state, 1.0)
    rule.step(state, 1.0)
    assert state.to_dict() == {
        "best": 1.0, "num_bad_evals": 0, "cooldown_counter": 0, "scale": 0.5, "cuts": 1, "last_value": 1.0,
        "num_evals": 2,
    }  # fmt: skip


# -- a min_lr list must match the param groups, checked when the Trainer is built ------------------------------------


@pytest.mark.parametrize("min_lr", [[0.1, 0.2, 0.3], [0.1]])
def test_min_lr_list_of_the_wrong_length_fails_when_the_trainer_is_built(min_lr: list[float]) -> None:
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR, min_lr=min_lr)
    with pytest.raises(ConfigError) as info:
        two_group_trainer(scheduler, [1.0], 4)  # Trainer(...) raises: nothing has trained
    message = str(info.value)
    assert message.count("\n") == 0
    assert message.startswith(f"scheduler.min_lr: {min_lr!r} has {len(min_lr)} value")
    assert "but the optimizer has 2 param groups; give one number for all groups, or exactly one per" in message


def test_min_lr_list_of_the_right_length_builds() -> None:
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR, min_lr=[0.1, 0.2])
    two_group_trainer(scheduler, [1.0], 4)


# -- the preview replays group 0 -------------------------------------------------------------------------------------


def test_preview_with_a_min_lr_list_replays_group_0() -> None:
    from foundry_ext.config.durations import Duration
    from foundry_ext.config.train_yaml import RunClock
    from foundry_ext.preview.schedule import build_schedule, simulate_plateau

    block = {"name": "reduce_lr_on_plateau", "monitor": MONITOR, "factor": 0.5, "patience": 0, "min_lr": [0.3, 0.1]}
    schedule = build_schedule(block, RunClock(Duration(40, "ba")))
    cuts, _ = simulate_plateau(schedule, [(4, 1.0), (8, 1.0), (12, 1.0)], [1.0])  # type: ignore[arg-type]
    assert [c.cut.new_scale for c in cuts] == [0.5, 0.3]  # group 0 floors at its own min_lr 0.3


# -- two ranks through the real launcher -----------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_two_ranks_floor_each_group_at_its_own_min_lr(demo_data: Path, tmp_path: Path) -> None:
    """yamls/tiny-resume.yaml (cuts at batches 9, 15, 21) with a second param group and ``min_lr: [0.001, 0.0005]``.

    Group 0 (everything but the norms) stops at 0.001 = scale 1/3 after its 2nd cut; group 1 (the norms) at
    0.0005 = scale 1/6 after its 3rd. Both ranks log the same LRs, equal to the real torch ReduceLROnPlateau fed the
    run's eval losses, and the checkpoint holds both scales.
    """
    overrides = [
        f"variables.data_local={demo_data}",
        f"save_folder={tmp_path}/checkpoints",
        f"code_paths=[{JSONL_LOGGER}]",
        f"loggers.jsonl.path={tmp_path}/metrics-rank{{rank}}.jsonl",
        "optimizer.param_groups=[{param_str_match: norm}]",
        "scheduler.min_lr=[0.001,0.0005]",
    ]
    yaml_path = REPO / "yamls" / "tiny-resume.yaml"
    status, output = launch_and_wait(yaml_path, overrides, nproc=2, log=tmp_path / "run.log", cwd=tmp_path, timeout=600)
    assert status == 0, output[-4000:]

    logs = [read_metrics(tmp_path / f"metrics-rank{r}.jsonl", last=True) for r in (0, 1)]
    assert logs[0] == logs[1], "the ranks logged different LRs, eval losses or plateau values"
    log = logs[0]
    evals = sorted(log["metrics/eval/LanguageCrossEntropy"].items())
    assert [t for t, _ in evals] == [3, 6, 9, 12, 15, 18, 21, 24]
    torch_lrs = torch_group_lrs(
        [v for _, v in evals], [0.003, 0.003], mode="min", factor=0.5, patience=1, threshold=100.0,
        threshold_mode="abs", min_lr=[0.001, 0.0005],
    )  # fmt: skip
    assert torch_lrs[-1] == pytest.approx([0.001, 0.0005], rel=1e-12)
    for g in (0, 1):
        lrs = log[f"lr-DecoupledAdamW/group{g}"]
        assert sorted(lrs) == list(range(1, 25))
        for b, lr in lrs.items():
            # lr_monitor logs at BATCH_END, before the evaluation of the same timestamp: the value at step b is the
            # LR of 0-indexed batch b as the schedule computed it, before a cut decided at that evaluation
            warmup = min(1.0, max(b - 1, 0) / 2)  # t_warmup 2ba, evaluated at timestamp b - 1
            done = [i for i, (t, _) in enumerate(evals) if t < b]
            scale = torch_lrs[done[-1]][g] / 0.003 if done else 1.0
            assert lr == pytest.approx(0.003 * warmup * scale, rel=1e-12), (g, b)
        assert log[f"lr_plateau/scale/group{g}"][24] == pytest.approx(torch_lrs[-1][g] / 0.003, rel=1e-12)
    state = load_checkpoint_safely(tmp_path / "checkpoints" / "ep0-ba24-rank0.pt")["state"]
    plateau = state["callbacks"]["ReduceLROnPlateauCallback"]["plateau"]
    assert plateau["group_scales"] == pytest.approx([1 / 3, 1 / 6], rel=1e-12) and plateau["cuts"] == 3
    assert [g["lr"] for g in state["optimizers"]["DecoupledAdamW"]["param_groups"]] == pytest.approx(
        [0.001, 0.0005], rel=1e-12
    )
