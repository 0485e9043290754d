"""reduce_lr_on_plateau: torch-equivalent decisions, the exact evaluation of each cut, composition, state, errors."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from composer.core import Event
from hypothesis import given, settings
from hypothesis import strategies as st
from llmfoundry.utils.builders import build_callback, build_scheduler

from foundry_ext import ConfigError, WarmupStableDecayScheduler
from foundry_ext.config import notices
from foundry_ext.schedules.plateau_rule import PlateauRule, PlateauState
from foundry_ext.trainer.plateau.callback import ReduceLROnPlateauCallback
from foundry_ext.trainer.plateau.scheduler import ReduceLROnPlateauScheduler
from tests.schedules.test_wsd import at, make_state
from tests.support.trainer_utils import BASE_LR, TinyModel, loader, make_trainer

MONITOR = "metrics/eval/Scripted"


def torch_lrs(values: list[float], base_lr: float = BASE_LR, **kwargs) -> list[float]:
    """The LR after each evaluation, according to the real torch ReduceLROnPlateau."""
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base_lr)
    sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
    out = []
    for v in values:
        sched.step(v)
        out.append(opt.param_groups[0]["lr"])
    return out


# -- the rule against real torch ---------------------------------------------------------------------------------

rule_params = st.fixed_dictionaries(
    {
        "mode": st.sampled_from(["min", "max"]),
        "factor": st.sampled_from([0.1, 0.5, 0.8]),
        "patience": st.integers(0, 4),
        "threshold": st.sampled_from([0.0, 1e-4, 0.05, 0.5]),
        "threshold_mode": st.sampled_from(["rel", "abs"]),
        "cooldown": st.integers(0, 3),
        "min_lr": st.sampled_from([0.0, 1e-3, 0.02]),
        "eps": st.sampled_from([1e-8, 1e-3]),
    },
)
# small integers make ties and plateaus frequent, which is where the counting rules differ between implementations
values_strategy = st.lists(st.integers(1, 6).map(float), min_size=1, max_size=60)


@settings(max_examples=400, deadline=None)
@given(params=rule_params, values=values_strategy)
def test_rule_matches_torch_for_random_sequences(params: dict, values: list[float]) -> None:
    base_lr = 0.1
    expected = torch_lrs(values, base_lr=base_lr, **params)
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base_lr)
    reference = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **params)
    rule, state = PlateauRule(**params), PlateauState()
    for i, value in enumerate(values):
        rule.step(state, value, [base_lr])
        reference.step(value)
        assert base_lr * state.scale == pytest.approx(expected[i], rel=1e-12), (i, values[: i + 1])
        assert state.num_bad_evals == reference.num_bad_epochs
        assert state.cooldown_counter == reference.cooldown_counter
        assert state.best == reference.best


def test_non_finite_values_count_as_no_improvement_and_never_become_best() -> None:
    rule, state = PlateauRule(mode="min", patience=1, factor=0.5), PlateauState()
    for value in [2.0, math.nan, -math.inf]:
        rule.step(state, value)
    assert state.best == 2.0  # torch would have taken -inf as best: every later value would be "no improvement"
    assert state.cuts == 1 and state.scale == 0.5


# -- through a real Trainer: the cut lands at the exact evaluation ------------------------------------------------


@settings(max_examples=12, deadline=None)
@given(
    values=st.lists(st.integers(1, 4).map(float), min_size=8, max_size=8),
    patience=st.integers(0, 2),
    cooldown=st.integers(0, 1),
)
def test_trainer_cuts_at_the_evaluations_torch_chooses(values: list[float], patience: int, cooldown: int) -> None:
    interval = 4
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR, factor=0.5, patience=patience, cooldown=cooldown)
    trainer, recorder = make_trainer(
        [scheduler], max_duration=f"{interval * len(values)}ba", eval_values=values, eval_interval=f"{interval}ba"
    )
    trainer.fit()
    expected = torch_lrs(values, factor=0.5, patience=patience, cooldown=cooldown)
    for k, lrs in recorder.lrs.items():
        evals_done = k // interval  # evaluation i runs after batch (i + 1) * interval - 1
        want = BASE_LR if evals_done == 0 else expected[evals_done - 1]
        assert lrs[0] == pytest.approx(want, rel=1e-12), (k, values)
    assert scheduler.callback.plateau.num_evals == len(values)


def test_cut_is_logged_and_printed(capsys: pytest.CaptureFixture) -> None:
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR, factor=0.5, patience=1)
    logged: list[dict] = []

    from composer.loggers import LoggerDestination

    class Capture(LoggerDestination):
        def log_metrics(self, metrics, step=None):
            logged.append({k: v for k, v in metrics.items() if k.startswith("lr_plateau/")})

    trainer, _ = make_trainer(
        [scheduler], max_duration="16ba", eval_values=[3.0, 3.0, 3.0, 3.0], eval_interval="4ba", loggers=[Capture()]
    )
    trainer.fit()
    out = capsys.readouterr().out
    assert "reduce_lr_on_plateau: cut LR scale 1 -> 0.5 at epoch 0, batch 12" in out
    assert "metrics/eval/Scripted=3 has not improved on best 3 for 2 evaluations (patience 1)" in out
    plateau_logs = [d for d in logged if d]
    assert plateau_logs[-1] == {
        "lr_plateau/scale": 0.5,
        "lr_plateau/best": 3.0,
        "lr_plateau/num_bad_evals": 1,
        "lr_plateau/cuts": 1,
    }


def test_warmup_and_base_are_multiplied_in() -> None:
    base = WarmupStableDecayScheduler(t_decay="8ba", alpha_f=0.5)
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR, factor=0.5, patience=0, t_warmup="5ba", base=base)
    # evaluation 1 (timestamp 4 < t_warmup) is in warmup and ignored; eval 2 sets best; eval 3 does not improve -> cut
    trainer, recorder = make_trainer(
        [scheduler], max_duration="24ba", eval_values=[1.0, 2.0, 2.0, 1.0, 1.0, 1.0], eval_interval="4ba"
    )
    trainer.fit()
    state = make_state("24ba")
    for k, lrs in recorder.lrs.items():
        t = max(k - 1, 0)  # Composer computes the LR of batch k at timestamp k - 1
        scale = 1.0 if k < 12 else 0.5 if k < 20 else 0.25
        want = BASE_LR * base(at(state, f"{t}ba")) * min(1.0, t / 5) * scale
        assert lrs[0] == pytest.approx(want, rel=1e-12), k


def test_base_from_yaml_block() -> None:
    scheduler = build_scheduler(
        "reduce_lr_on_plateau", {"base": {"name": "cosine_with_warmup", "t_warmup": "10ba", "alpha_f": 0.1}}
    )
    from composer.optim import CosineAnnealingWithWarmupScheduler

    reference = CosineAnnealingWithWarmupScheduler(t_warmup="10ba", alpha_f=0.1)
    state = make_state("100ba")
    for t in (0, 5, 10, 50, 100):
        assert scheduler(at(state, f"{t}ba")) == reference(at(state, f"{t}ba"))


def test_train_loss_monitor() -> None:
    scheduler = ReduceLROnPlateauScheduler(
        monitor="loss/train/total", check_interval="5ba", factor=0.5, patience=0, threshold=10.0, threshold_mode="abs"
    )
    # an absolute threshold of 10 means no check ever improves on the first: a cut at every check after the first
    trainer, recorder = make_trainer([scheduler], max_duration="20ba")
    trainer.fit()
    assert scheduler.callback.plateau.num_evals == 4
    assert scheduler.callback.plateau.cuts == 3
    assert [recorder.lrs[k][0] / BASE_LR for k in (4, 5, 9, 10, 14, 15, 19)] == pytest.approx(
        [1, 1, 1, 0.5, 0.5, 0.25, 0.25]
    )


# -- wiring -------------------------------------------------------------------------------------------------------


def test_scheduler_attaches_exactly_one_adapter() -> None:
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR)
    trainer, _ = make_trainer([scheduler], max_duration="4ba", eval_values=[1.0])
    adapters = [cb for cb in trainer.state.callbacks if isinstance(cb, ReduceLROnPlateauCallback)]
    assert adapters == [scheduler.callback]


def test_listed_callback_is_adopted_not_duplicated() -> None:
    listed = build_callback("reduce_lr_on_plateau", {})
    scheduler = build_scheduler("reduce_lr_on_plateau", {"monitor": MONITOR, "patience": 0, "factor": 0.5})
    trainer, _ = make_trainer(
        [scheduler], max_duration="12ba", eval_values=[2.0, 2.0, 2.0], eval_interval="4ba", callbacks=[listed]
    )
    trainer.fit()
    adapters = [cb for cb in trainer.state.callbacks if isinstance(cb, ReduceLROnPlateauCallback)]
    assert adapters == [listed]
    assert listed.plateau.cuts == 2 and scheduler.callback is listed


def test_state_dict_round_trip() -> None:
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR, factor=0.5, patience=0)
    trainer, _ = make_trainer([scheduler], max_duration="12ba", eval_values=[2.0, 3.0, 1.0], eval_interval="4ba")
    trainer.fit()
    saved = trainer.state.state_dict()["callbacks"]["ReduceLROnPlateauCallback"]
    assert saved["plateau"] == {
        "best": 1.0,
        "num_bad_evals": 0,
        "cooldown_counter": 0,
        "scale": 0.5,
        "cuts": 1,
        "last_value": 1.0,
        "num_evals": 3,
    }
    fresh = ReduceLROnPlateauCallback()
    fresh.load_state_dict(saved)
    assert fresh.state_dict() == saved


def test_resume_restores_the_plateau_state(tmp_path) -> None:
    values = [3.0, 3.0, 3.0, 2.0, 2.0, 2.0, 2.0, 2.0]
    full = ReduceLROnPlateauScheduler(monitor=MONITOR, factor=0.5, patience=1)
    trainer, full_lrs = make_trainer([full], max_duration="32ba", eval_values=values, eval_interval="4ba")
    trainer.fit()

    first = ReduceLROnPlateauScheduler(monitor=MONITOR, factor=0.5, patience=1)
    trainer, _ = make_trainer(
        [first],
        max_duration="32ba",
        eval_values=values,
        eval_interval="4ba",
        save_folder=str(tmp_path),
        save_interval="16ba",
    )
    trainer.fit(duration="16ba")
    trainer.close()
    second = ReduceLROnPlateauScheduler(monitor=MONITOR, factor=0.5, patience=1)
    trainer, resumed_lrs = make_trainer(
        [second],
        max_duration="32ba",
        eval_values=values[4:],
        eval_interval="4ba",
        load_path=str(tmp_path / "ep0-ba16-rank0.pt"),
    )
    trainer.fit()
    assert second.callback.plateau == full.callback.plateau
    assert {k: v for k, v in resumed_lrs.lrs.items()} == {k: v for k, v in full_lrs.lrs.items() if k >= 16}


def test_checkpoint_without_plateau_state_warns_and_starts_fresh(tmp_path, capsys, monkeypatch) -> None:
    trainer, _ = make_trainer(
        [WarmupStableDecayScheduler()], max_duration="8ba", save_folder=str(tmp_path), save_interval="8ba"
    )
    trainer.fit()
    trainer.close()
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR)
    trainer, _ = make_trainer(
        [scheduler], max_duration="12ba", eval_values=[1.0], load_path=str(tmp_path / "ep0-ba8-rank0.pt")
    )
    monkeypatch.setattr(notices, "_seen", set())
    capsys.readouterr()
    trainer.fit()
    lines = [line for line in capsys.readouterr().err.splitlines() if "plateau state" in line]
    assert lines == [
        "foundry-ext: warning: reduce_lr_on_plateau: resumed at batch 8 with no plateau state in the checkpoint; "
        "starting fresh (scale 1, no best value): it was reset with load_ignore_keys, or the checkpoint was saved "
        "without foundry-ext"
    ]
    assert scheduler.callback.plateau.scale == 1.0


# -- bad input ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"factor": 1.0}, r"scheduler\.factor: 1\.0 is out of range; expected a number in \(0, 1\)"),
        ({"factor": 0}, r"scheduler\.factor: 0 is out of range"),
        ({"patience": -1}, r"scheduler\.patience: -1 is out of range; expected an integer >= 0"),
        ({"cooldown": -2}, r"scheduler\.cooldown: -2 is out of range"),
        ({"patience": 1.5}, r"scheduler\.patience: 1\.5 \(float\) is not an integer"),
        ({"mode": "minimum"}, r"scheduler\.mode: 'minimum' is not allowed \(did you mean 'min'\?\); allowed: min, max"),
        ({"threshold_mode": "relative"}, r"scheduler\.threshold_mode: 'relative' is not allowed"),
        ({"patiance": 3}, r"scheduler\.patiance: unknown key \(did you mean 'patience'\?\)"),
        ({"monitor": "eval_loss"}, r"scheduler\.monitor: 'eval_loss' is not a metric name Composer logs"),
        ({"monitor": "loss/train/total"}, r"scheduler\.check_interval: is required when monitor is a train loss"),
        ({"check_interval": "10ba"}, r"scheduler\.check_interval: .*only applies to loss/train"),
        ({"min_lr": -1}, r"scheduler\.min_lr: -1\.0 is out of range"),
        ({"base": {"name": "cosine_warmup"}}, r"scheduler\.base\.name: 'cosine_warmup' is not a registered scheduler"),
        ({"base": {"name": "reduce_lr_on_plateau"}}, r"scheduler\.base\.name: reduce_lr_on_plateau cannot be its"),
        ({"base": {"name": "warmup_stable_decay", "t_decya": "1ba"}}, r"scheduler\.base\.t_decya: unknown key"),
        ({"base": {"name": "cosine_with_warmup"}}, r"scheduler\.base\.t_warmup: is required"),
    ],
)
def test_config_errors(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build_scheduler("reduce_lr_on_plateau", kwargs)


def test_callback_takes_no_keys() -> None:
    with pytest.raises(ConfigError, match=r"callbacks\.reduce_lr_on_plateau\.factor: unknown key; the callback takes"):
        build_callback("reduce_lr_on_plateau", {"factor": 0.5})


def test_unknown_monitor_fails_at_fit_start_listing_what_exists() -> None:
    scheduler = ReduceLROnPlateauScheduler(monitor="metrics/eval/LanguageCrossEntropy")
    trainer, recorder = make_trainer([scheduler], max_duration="8ba", eval_values=[1.0])
    with pytest.raises(
        ConfigError,
        match=r"scheduler\.monitor: .* not produced by any evaluator; available: "
        r"metrics/eval/Scripted",
    ):
        trainer.fit()
    assert recorder.lrs == {}  # before the first batch


def test_eval_monitor_without_eval_loader() -> None:
    trainer, recorder = make_trainer([ReduceLROnPlateauScheduler(monitor=MONITOR)], max_duration="8ba")
    with pytest.raises(ConfigError, match=r"scheduler\.monitor: .* the run has no evaluator; add an eval_loader"):
        trainer.fit()
    assert recorder.lrs == {}


def test_listed_callback_without_plateau_scheduler() -> None:
    trainer, _ = make_trainer(
        [WarmupStableDecayScheduler()], max_duration="4ba", callbacks=[ReduceLROnPlateauCallback()]
    )
    with pytest.raises(ConfigError, match=r"callbacks\.reduce_lr_on_plateau: is listed but the scheduler is not"):
        trainer.fit()


def test_nan_metric_warns_and_never_crashes(caplog: pytest.LogCaptureFixture) -> None:
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR, factor=0.5, patience=0)
    trainer, _ = make_trainer([scheduler], max_duration="12ba", eval_values=[2.0, math.nan, 1.0], eval_interval="4ba")
    with caplog.at_level("WARNING"):
        trainer.fit()
    assert "metrics/eval/Scripted is nan" in caplog.text
    assert scheduler.callback.plateau.best == 1.0 and scheduler.callback.plateau.cuts == 1


def test_multiple_optimizers_are_refused() -> None:
    from composer import Trainer

    model = TinyModel([1.0])
    half = list(model.parameters())
    with pytest.raises(Exception, match=r"Only one optimizer is supported|multiple optimizers|exactly one optimizer"):
        Trainer(
            model=model,
            train_dataloader=loader(),
            max_duration="4ba",
            optimizers=[torch.optim.SGD(half[:1], lr=0.1), torch.optim.SGD(half[1:], lr=0.1)],
            schedulers=[ReduceLROnPlateauScheduler(monitor=MONITOR)],
            device="cpu",
        )


def test_the_callback_keeps_its_checkpoint_key() -> None:
    """Composer keys a callback's saved state by the class ``__qualname__``: the module may move, the name may not
    (tests/resume/test_fixture_resume.py loads a checkpoint saved before the move)."""
    assert ReduceLROnPlateauCallback.__qualname__ == "ReduceLROnPlateauCallback"
    assert ReduceLROnPlateauCallback.__module__ == "foundry_ext.trainer.plateau.callback"


def test_no_event_runs_a_collective_per_training_batch() -> None:
    """Single process: the adapter only reacts to BATCH_END for a train monitor; with an eval monitor it returns."""
    scheduler = ReduceLROnPlateauScheduler(monitor=MONITOR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer, _ = make_trainer([scheduler], max_duration="4ba", eval_values=[1.0])
    calls: list[str] = []
    import foundry_ext.trainer.plateau.callback as module

    original = module.broadcast_value
    module.broadcast_value = lambda state, value: calls.append("broadcast") or original(state, value)
    try:
        for _ in range(5):
            scheduler.callback.run_event(Event.BATCH_END, trainer.state, trainer.logger)
    finally:
        module.broadcast_value = original
    assert calls == []
