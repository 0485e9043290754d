"""Changing settings across a resume is announced, never silent (docs/resume.md, "Changing settings across a resume").

Every test trains a real Composer ``Trainer``, writes a real checkpoint, and resumes it with ``load_path`` into a
second Trainer whose settings differ; the LR the optimizer really uses for each batch is recorded, so each warning is
checked against what actually happened. The warnings are the ``foundry-ext: warning: ...`` lines of
:func:`foundry_ext.config.notices.warn_once` (one per process and message, on rank 0).
"""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

import pytest
import torch
from composer import Trainer
from composer.core import Callback, Event, State
from composer.loggers import Logger
from llmfoundry.utils.builders import build_callback, build_scheduler
from torchmetrics import Metric

import foundry_ext.config.notices as notices
from foundry_ext import ConfigError, WarmupStableDecayScheduler
from foundry_ext.trainer.plateau.scheduler import ReduceLROnPlateauScheduler
from foundry_ext.trainer.resume_check import ScheduleResumeCheck
from tests.support.trainer_utils import BASE_LR, LRRecorder, ScriptedMetric, TinyModel, loader

CE = "metrics/eval/LanguageCrossEntropy"
PPL = "metrics/eval/LanguagePerplexity"


class TwoMetricModel(TinyModel):
    """A scripted cross-entropy and its perplexity, exp(CE), like llm-foundry's two eval metrics."""

    def __init__(self, ce_values: list[float]) -> None:
        super().__init__(ce_values)

    def get_metrics(self, is_train: bool = False) -> dict[str, Metric]:
        if is_train:
            return {}
        assert self.eval_values is not None
        return {
            "LanguageCrossEntropy": ScriptedMetric(self.eval_values),
            "LanguagePerplexity": ScriptedMetric([math.exp(v) for v in self.eval_values]),
        }


class Timeline(Callback):
    """Records foundry-ext warnings and the first BATCH_START in one list, to show the order."""

    def __init__(self) -> None:
        super().__init__()
        self.events: list[str] = []
        self.handler = logging.Handler(level=logging.WARNING)
        self.handler.emit = lambda record: self.events.append(record.getMessage())  # type: ignore[method-assign]

    def run_event(self, event: Event, state: State, logger: Logger) -> None:
        del state, logger
        if event == Event.BATCH_START and "BATCH_START" not in self.events:
            self.events.append("BATCH_START")

    @property
    def warnings(self) -> list[str]:
        return [e for e in self.events if e != "BATCH_START"]

    def before_first_batch(self) -> list[str]:
        return self.events[: self.events.index("BATCH_START")]


@pytest.fixture
def timeline(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(notices, "_seen", set())  # warn_once is once per process: each test starts clean
    line = Timeline()
    log = logging.getLogger("foundry_ext.notices")
    log.addHandler(line.handler)
    yield line
    log.removeHandler(line.handler)


def train(
    schedulers: list[Any],
    *,
    max_duration: str,
    eval_values: list[float] | None = None,
    lr: float = BASE_LR,
    callbacks: tuple[Callback, ...] = (),
    **kwargs: Any,
) -> tuple[Trainer, LRRecorder]:
    """Build a real Trainer (eval every 4 batches when ``eval_values`` is given) and fit it."""
    torch.manual_seed(0)
    model = TwoMetricModel(eval_values) if eval_values is not None else TinyModel()
    recorder = LRRecorder()
    trainer = Trainer(
        model=model,
        train_dataloader=loader(64),
        eval_dataloader=loader(8, seed=1) if eval_values is not None else None,
        eval_interval="4ba",
        max_duration=max_duration,
        optimizers=torch.optim.SGD(model.parameters(), lr=lr),
        schedulers=schedulers,
        callbacks=[recorder, *callbacks],
        device="cpu",
        progress_bar=False,
        log_to_console=False,
        seed=0,
        **kwargs,
    )
    trainer.fit()
    return trainer, recorder


def checkpoint(tmp_path: Path, schedulers: list[Any], batches: int, **kwargs: Any) -> Path:
    """Train (to ``max_duration``), saving every ``batches``; return the checkpoint at ``batches``.

    The whole run trains, not ``fit(duration=...)``: that would change ``max_duration`` (Composer sets it to the
    duration), and with it every ``dur``-relative schedule.
    """
    trainer, _ = train(schedulers, save_folder=str(tmp_path), save_interval=f"{batches}ba", **kwargs)
    trainer.close()
    return tmp_path / f"ep{(batches - 1) // 16}-ba{batches}-rank0.pt"  # 16 batches per epoch


# -- 12.2: the plateau state records its configuration -------------------------------------------------------------


def test_changed_monitor_restarts_the_comparison_and_keeps_the_scale(tmp_path: Path, timeline: Timeline) -> None:
    """The report: resumed with monitor changed from the cross-entropy to the perplexity."""
    ce = [6.36, 5.2, 4.8, 4.6, 4.4, 4.3, 4.2, 4.1]  # improving, but never by 100 nats: a cut every 2nd evaluation
    settings = {"factor": 0.5, "patience": 1, "threshold": 100.0, "threshold_mode": "abs"}
    path = checkpoint(
        tmp_path, [ReduceLROnPlateauScheduler(monitor=CE, **settings)], 16, max_duration="32ba", eval_values=ce
    )
    # evaluations at 4 (best 6.36), 8 (bad), 12 (cut: 0.5), 16 (bad): the checkpoint holds best 6.36, 1 bad, scale 0.5

    # resumed with the perplexity and a relative threshold, as a user would: every evaluation now improves on the last
    resumed = ReduceLROnPlateauScheduler(monitor=PPL, factor=0.5, patience=1)
    _, recorder = train([resumed], max_duration="32ba", eval_values=ce[4:], load_path=str(path),
                        callbacks=(timeline,))  # fmt: skip
    before = timeline.before_first_batch()
    assert len(before) == 2, before
    assert before[0] == (
        f"foundry-ext: warning: reduce_lr_on_plateau: resumed at batch 16 with monitor '{PPL}' (the checkpoint's: "
        f"'{CE}'): the comparison restarts (best 6.36, 1 bad evaluations and cooldown 0 dropped); the LR scale 0.5 "
        "and 1 cuts are kept"
    )
    assert before[1] == (
        "foundry-ext: warning: reduce_lr_on_plateau: settings changed since the checkpoint apply from batch 16 on: "
        "threshold_mode 'abs' -> 'rel', threshold 100.0 -> 0.0001 (kept: 0 bad evaluations, cooldown 0)"
    )
    plateau = resumed.callback.plateau
    assert plateau.best == pytest.approx(math.exp(ce[-1]))  # the perplexities' best, not the cross-entropy's 6.36
    assert (plateau.cuts, plateau.scale) == (1, 0.5)  # no cut after the resume: the perplexity kept improving
    assert all(lrs == [BASE_LR * 0.5] for lrs in recorder.lrs.values())


def test_without_the_fix_the_perplexity_would_be_cut_at_every_second_evaluation() -> None:
    """What the report saw, from the rule alone: perplexities (~80) compared against a cross-entropy best (6.36)."""
    from foundry_ext.schedules.plateau_rule import PlateauRule, PlateauState

    rule = PlateauRule(factor=0.5, patience=1)
    state = PlateauState(best=6.36)
    cuts = [rule.step(state, math.exp(v)) is not None for v in [4.4, 4.3, 4.2, 4.1]]
    assert cuts == [False, True, False, True]


def test_changed_mode_restarts_the_comparison(tmp_path: Path, timeline: Timeline) -> None:
    path = checkpoint(tmp_path, [ReduceLROnPlateauScheduler(monitor=CE, factor=0.5, patience=0)], 16,
                      max_duration="32ba", eval_values=[3.0, 3.0, 3.0, 3.0])  # fmt: skip
    resumed = ReduceLROnPlateauScheduler(monitor=CE, mode="max", factor=0.5, patience=0)
    train([resumed], max_duration="20ba", eval_values=[1.0], load_path=str(path), callbacks=(timeline,))
    assert timeline.warnings == [
        "foundry-ext: warning: reduce_lr_on_plateau: resumed at batch 16 with mode 'max' (the checkpoint's: 'min'): "
        "the comparison restarts (best 3, 0 bad evaluations and cooldown 0 dropped); the LR scale 0.125 and 3 "
        "cuts are kept"
    ]
    assert resumed.callback.plateau.best == 1.0 and resumed.callback.plateau.cuts == 3


def test_changed_settings_apply_from_the_resume_and_are_listed(tmp_path: Path, timeline: Timeline) -> None:
    values = [3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0]
    path = checkpoint(tmp_path, [ReduceLROnPlateauScheduler(monitor=CE, factor=0.5, patience=2)], 16,
                      max_duration="32ba", eval_values=values)  # fmt: skip
    resumed = ReduceLROnPlateauScheduler(monitor=CE, factor=0.25, patience=0, cooldown=1)
    _, recorder = train([resumed], max_duration="32ba", eval_values=values[4:], load_path=str(path),
                        callbacks=(timeline,))  # fmt: skip
    assert timeline.before_first_batch() == [
        "foundry-ext: warning: reduce_lr_on_plateau: settings changed since the checkpoint apply from batch 16 on: "
        "patience 2 -> 0, factor 0.5 -> 0.25, cooldown 0 -> 1 (kept: 0 bad evaluations, cooldown 0)"
    ]
    # the same as torch's scheduler whose attributes are changed after 4 evaluations
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=BASE_LR)
    reference = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=0.5, patience=2)
    for v in values[:4]:
        reference.step(v)
    reference.factor, reference.patience, reference.cooldown = 0.25, 0, 1
    expected = []
    for v in values[4:]:
        reference.step(v)
        expected.append(opt.param_groups[0]["lr"])
    for k, lrs in recorder.lrs.items():
        done = (k - 16) // 4
        want = BASE_LR * 0.5 if done == 0 else expected[done - 1]
        assert lrs[0] == pytest.approx(want, rel=1e-12), k


def test_an_unchanged_resume_says_nothing(tmp_path: Path, timeline: Timeline) -> None:
    values = [3.0, 2.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0]
    base = {"t_decay": "8ba", "alpha_f": 0.1}
    path = checkpoint(
        tmp_path,
        [ReduceLROnPlateauScheduler(monitor=CE, factor=0.5, patience=1, base=WarmupStableDecayScheduler(**base))],
        16,
        max_duration="32ba",
        eval_values=values,
    )
    resumed = ReduceLROnPlateauScheduler(monitor=CE, factor=0.5, patience=1, base=WarmupStableDecayScheduler(**base))
    train([resumed], max_duration="32ba", eval_values=values[4:], load_path=str(path), callbacks=(timeline,))
    assert timeline.warnings == []


def test_checkpoint_from_before_the_settings_were_recorded(tmp_path: Path, timeline: Timeline) -> None:
    path = checkpoint(tmp_path, [ReduceLROnPlateauScheduler(monitor=CE)], 8, max_duration="8ba", eval_values=[1.0])
    saved = torch.load(path, weights_only=False)
    del saved["state"]["callbacks"]["ReduceLROnPlateauCallback"]["config"]  # as written by foundry-ext before
    torch.save(saved, path)
    train([ReduceLROnPlateauScheduler(monitor=CE)], max_duration="12ba", eval_values=[1.0], load_path=str(path),
          callbacks=(timeline,))  # fmt: skip
    assert timeline.before_first_batch() == [
        "foundry-ext: warning: reduce_lr_on_plateau: the checkpoint's plateau state does not record its monitor and "
        "settings (written by an older foundry-ext), so a changed monitor or mode cannot be detected; if you changed "
        "them, reset the state with load_ignore_keys: [state/callbacks/ReduceLROnPlateauCallback]"
    ]


# -- 12.3: scheduler changes across a resume ---------------------------------------------------------------------------


def test_plateau_checkpoint_resumed_without_a_plateau_scheduler(tmp_path: Path, timeline: Timeline) -> None:
    path = checkpoint(tmp_path, [ReduceLROnPlateauScheduler(monitor=CE, factor=0.5, patience=0)], 16,
                      max_duration="16ba", eval_values=[2.0, 2.0, 1.0, 1.0])  # fmt: skip
    # evaluations at 4 (best), 8 (cut 0.5), 12 (better), 16 (cut 0.25): the next batch trains at 0.025
    _, recorder = train([WarmupStableDecayScheduler(t_decay="0ba")], max_duration="24ba", load_path=str(path),
                        callbacks=(timeline,))  # fmt: skip
    assert recorder.lrs[16] == [pytest.approx(BASE_LR * 0.25)] and recorder.lrs[17] == [BASE_LR]  # what happened
    assert timeline.before_first_batch() == [
        "foundry-ext: warning: resuming at batch 16 changes the LR: batch 16 trains at the checkpoint's 0.025, then "
        "batch 17 at 0.1 where the checkpoint's schedule gives 0.025 (0-indexed batches; lr_monitor step 17); cause: "
        "the scheduler changed from reduce_lr_on_plateau to warmup_stable_decay; the checkpoint's plateau state "
        "(scale 0.25 after 2 cuts) is not used: this run has no reduce_lr_on_plateau; max_duration changed from "
        "16ba to 24ba (durations in dur, and t_max defaults of 1dur, follow it; see docs/resume.md, 'Extending a "
        "finished run')"
    ]


def test_wsd_resumed_past_its_end_with_a_longer_max_duration(tmp_path: Path, timeline: Timeline) -> None:
    wsd = {"t_decay": "0.2dur", "alpha_f": 0.22}
    path = checkpoint(tmp_path, [WarmupStableDecayScheduler(**wsd)], 20, max_duration="20ba")
    _, recorder = train([WarmupStableDecayScheduler(**wsd)], max_duration="40ba", load_path=str(path),
                        callbacks=(timeline,))  # fmt: skip
    # batch 20 trains at the end of the decay, batch 21 back at the peak: the decay now starts at batch 32
    assert recorder.lrs[20] == [pytest.approx(BASE_LR * (0.22 + 0.78 * 0.25))] and recorder.lrs[21] == [BASE_LR]
    assert timeline.before_first_batch() == [
        "foundry-ext: warning: resuming at batch 20 changes the LR: batch 20 trains at the checkpoint's 0.0415, then "
        "batch 21 at 0.1 where the checkpoint's schedule gives 0.022 (0-indexed batches; lr_monitor step 21); cause: "
        "max_duration changed from 20ba to 40ba (durations in dur, and t_max defaults of 1dur, follow it; see "
        "docs/resume.md, 'Extending a finished run')"
    ]


def test_extending_a_finished_run_with_an_absolute_t_max_holds_alpha_f(tmp_path: Path, timeline: Timeline) -> None:
    """docs/resume.md's first recipe: t_max (and t_decay) absolute, so a longer max_duration moves nothing."""
    wsd = {"t_decay": "4ba", "t_max": "20ba", "alpha_f": 0.22}
    path = checkpoint(tmp_path, [WarmupStableDecayScheduler(**wsd)], 20, max_duration="20ba")
    _, recorder = train([WarmupStableDecayScheduler(**wsd)], max_duration="40ba", load_path=str(path),
                        callbacks=(timeline,))  # fmt: skip
    assert all(lrs == [pytest.approx(BASE_LR * 0.22)] for k, lrs in recorder.lrs.items() if k > 20)
    assert not [w for w in timeline.warnings if "changes the LR" in w]


def test_extending_from_a_stable_phase_checkpoint_moves_the_decay(tmp_path: Path, timeline: Timeline) -> None:
    """docs/resume.md's second recipe: resume a checkpoint from before the decay; the decay moves to the new end."""
    wsd = {"t_decay": "0.2dur", "alpha_f": 0.22}
    path = checkpoint(tmp_path, [WarmupStableDecayScheduler(**wsd)], 16, max_duration="20ba")
    _, recorder = train([WarmupStableDecayScheduler(**wsd)], max_duration="40ba", load_path=str(path),
                        callbacks=(timeline,))  # fmt: skip
    assert [recorder.lrs[k][0] for k in (16, 17, 33)] == [BASE_LR, BASE_LR, BASE_LR]
    # the decay over the last 8 of 40 batches: batch 34 trains with the multiplier at timestamp 33
    assert recorder.lrs[34][0] == pytest.approx(BASE_LR * (1 - 0.78 / 8))
    assert timeline.warnings == []


def test_llm_foundry_scheduler_with_the_callback_listed(tmp_path: Path, timeline: Timeline) -> None:
    cosine = {"t_warmup": "2ba", "alpha_f": 0.1}
    listed = build_callback("schedule_resume_check", {})
    path = checkpoint(tmp_path, [build_scheduler("cosine_with_warmup", cosine)], 20, max_duration="20ba",
                      callbacks=(listed,))  # fmt: skip
    _, recorder = train([build_scheduler("cosine_with_warmup", cosine)], max_duration="40ba", load_path=str(path),
                        callbacks=(build_callback("schedule_resume_check", {}), timeline))  # fmt: skip
    before = timeline.before_first_batch()
    assert len(before) == 1 and before[0].startswith(
        "foundry-ext: warning: resuming at batch 20 changes the LR: batch 20 trains at the checkpoint's "
        f"{recorder.lrs[20][0]:.6g}, then batch 21 at {recorder.lrs[21][0]:.6g} where the checkpoint's schedule "
        "gives 0.01 (0-indexed batches; lr_monitor step 21)"  # cosine_with_warmup ends at alpha_f = 0.1
    ), before
    assert "cause: max_duration changed from 20ba to 40ba" in before[0]


def test_a_changed_optimizer_lr_is_named(tmp_path: Path, timeline: Timeline) -> None:
    path = checkpoint(tmp_path, [build_scheduler("constant", {})], 8, max_duration="8ba")
    _, recorder = train([build_scheduler("constant", {})], max_duration="12ba", lr=0.3,
                        load_path=str(path), callbacks=(timeline,))  # fmt: skip
    assert all(lrs == [BASE_LR] for lrs in recorder.lrs.values())  # Composer keeps the checkpoint's 0.1
    assert timeline.before_first_batch() == [
        "foundry-ext: warning: optimizer lr 0.3 of this run's config is not used: a resumed run keeps the "
        "checkpoint's base LR 0.1 (Composer restores the optimizer's param groups and the LambdaLR's base_lrs); to "
        "change the LR of a resumed run, change the schedule, not optimizer.lr"
    ]


def test_every_scheduler_of_the_package_attaches_one_check() -> None:
    for scheduler in (
        WarmupStableDecayScheduler(),
        build_scheduler("cosine", {}),
        build_scheduler("torch_lr_scheduler", {"type": "StepLR", "step_size": 4}),
        ReduceLROnPlateauScheduler(monitor=CE, base={"name": "linear"}),
    ):
        trainer, _ = train([scheduler], max_duration="1ba", eval_values=[1.0])
        checks = [cb for cb in trainer.state.callbacks if isinstance(cb, ScheduleResumeCheck)]
        assert len(checks) == 1, scheduler
        saved = trainer.state.state_dict()["callbacks"]["ScheduleResumeCheck"]
        assert saved["schedulers"][0]["name"] == scheduler.config.name


def test_the_check_takes_only_reset_lr() -> None:
    with pytest.raises(ConfigError, match=r"^callbacks\.schedule_resume_check\.every: unknown key; allowed keys: r"):
        build_callback("schedule_resume_check", {"every": 1})
