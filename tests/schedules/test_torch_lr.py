"""TorchLRScheduler: parity with real torch schedulers, purity, far jumps, config errors, registry and Trainer."""

from __future__ import annotations

import random
import warnings

import pytest
import torch
from composer import Callback, Event, Trainer
from composer.core import State, Time, Timestamp
from composer.devices import DeviceCPU
from composer.models import ComposerClassifier
from omegaconf import OmegaConf
from torch.optim import lr_scheduler as torch_lr
from torch.utils.data import DataLoader, TensorDataset

from foundry_ext.config.errors import ConfigError
from foundry_ext.trainer.torch_engine import _fresh, _seek
from foundry_ext.trainer.torch_lr import TorchLRScheduler

WARMUP_COSINE = {
    "type": "SequentialLR",
    "schedulers": [
        {"type": "LinearLR", "start_factor": 0.1, "total_iters": 100},
        {"type": "CosineAnnealingLR", "T_max": 900},
    ],
    "milestones": [100],
}
CHAINED = {
    "type": "ChainedScheduler",
    "schedulers": [
        {"type": "ConstantLR", "factor": 0.1, "total_iters": 150},
        {"type": "ExponentialLR", "gamma": 0.9995},
    ],
}


# --------------------------------------------------------------------------------------------------------------
# Helpers: a real torch scheduler built independently of the code under test, and a minimal Composer State.
# --------------------------------------------------------------------------------------------------------------


def _real_torch(config: dict) -> tuple[torch.optim.Optimizer, torch_lr.LRScheduler]:
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0, momentum=0.9)

    def build(cfg: dict) -> torch_lr.LRScheduler:
        kwargs = {k: v for k, v in cfg.items() if k != "type"}
        cls = getattr(torch_lr, cfg["type"])
        if "schedulers" in kwargs:
            kwargs["schedulers"] = [build(c) for c in kwargs["schedulers"]]
        if cls is torch_lr.ChainedScheduler:
            return cls(optimizer=optimizer, **kwargs)
        return cls(optimizer, **kwargs)

    return optimizer, build(config)


def torch_lrs(config: dict, n: int) -> list[float]:
    """The LR of a real torch scheduler (base LR 1.0) after 0, 1, ..., n calls of .step()."""
    optimizer, sched = _real_torch(config)
    lrs = [optimizer.param_groups[0]["lr"]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # step before optimizer.step; SequentialLR's step(0) deprecation
        for _ in range(n):
            sched.step()
            lrs.append(optimizer.param_groups[0]["lr"])
    return lrs


@pytest.fixture
def state(request: pytest.FixtureRequest) -> State:
    # A 2,000,000-batch run, so that far jumps are in it; a OneCycleLR config gets a run its total_steps covers
    # (a longer one is a config error, tested below).
    config = getattr(getattr(request.node, "callspec", None), "params", {}).get("config", {})
    length = config.get("total_steps", 2_000_000) if isinstance(config, dict) else 2_000_000
    return State(
        model=torch.nn.Linear(1, 1),
        rank_zero_seed=0,
        run_name="t",
        device=DeviceCPU(),
        max_duration=f"{length + 1}ba",
    )


def at(sched: TorchLRScheduler, state: State, t: int, ssr: float = 1.0) -> float:
    state.timestamp = Timestamp(batch=t)
    return sched(state, ssr)


def build(config: dict) -> TorchLRScheduler:
    sched = TorchLRScheduler(**config)
    # These tests ask for single batches of a 2,000,000-batch run to compare with torch, some with configs that go out
    # of bounds somewhere in it (the recursive chain reaches -1275 x); the whole-run check that refuses those
    # before batch 0 is tested in tests/catalog/test_run_lr_checks.py.
    sched.resolve.batch_multiplier = None
    return sched


# --------------------------------------------------------------------------------------------------------------
# Parity with real torch, batch by batch and in random order.
# --------------------------------------------------------------------------------------------------------------

PARITY = [
    pytest.param({"type": "StepLR", "step_size": 300, "gamma": 0.5}, 3000, id="StepLR"),
    pytest.param({"type": "MultiStepLR", "milestones": [100, 700, 700, 2000], "gamma": 0.3}, 3000, id="MultiStepLR"),
    pytest.param({"type": "ConstantLR", "factor": 0.25, "total_iters": 400}, 2000, id="ConstantLR"),
    pytest.param(
        {"type": "LinearLR", "start_factor": 0.01, "end_factor": 0.5, "total_iters": 1500}, 3000, id="LinearLR"
    ),
    pytest.param({"type": "ExponentialLR", "gamma": 0.999}, 3000, id="ExponentialLR"),
    pytest.param({"type": "PolynomialLR", "total_iters": 2500, "power": 2.0}, 3000, id="PolynomialLR"),
    pytest.param({"type": "CosineAnnealingLR", "T_max": 700, "eta_min": 0.05}, 3000, id="CosineAnnealingLR-cycles"),
    pytest.param({"type": "CosineAnnealingLR", "T_max": 20000}, 20000, id="CosineAnnealingLR-20000"),
    pytest.param({"type": "CosineAnnealingWarmRestarts", "T_0": 50, "T_mult": 2, "eta_min": 0.01}, 3000, id="CAWR"),
    pytest.param({"type": "OneCycleLR", "max_lr": 1.0, "total_steps": 3000}, 3000, id="OneCycleLR"),
    pytest.param(
        {"type": "OneCycleLR", "max_lr": 1.0, "total_steps": 2000, "three_phase": True, "anneal_strategy": "linear"},
        2000,
        id="OneCycleLR-three-phase",
    ),
    pytest.param({"type": "CyclicLR", "base_lr": 0.1, "max_lr": 1.0, "step_size_up": 200}, 3000, id="CyclicLR"),
    pytest.param(
        {"type": "CyclicLR", "base_lr": 0.1, "max_lr": 1.0, "step_size_up": 150, "mode": "exp_range", "gamma": 0.999},
        3000,
        id="CyclicLR-exp_range",
    ),
    pytest.param(WARMUP_COSINE, 3000, id="SequentialLR-warmup-cosine"),
    pytest.param(
        {
            "type": "SequentialLR",
            "schedulers": [
                {"type": "ConstantLR", "factor": 0.1, "total_iters": 50},
                {"type": "CosineAnnealingWarmRestarts", "T_0": 300},
                {"type": "ExponentialLR", "gamma": 0.998},
            ],
            "milestones": [200, 1500],
        },
        3000,
        id="SequentialLR-three",
    ),
    pytest.param(CHAINED, 3000, id="ChainedScheduler"),
    pytest.param(
        {
            "type": "ChainedScheduler",
            "schedulers": [
                {"type": "LinearLR", "start_factor": 0.1, "total_iters": 100},
                {"type": "CosineAnnealingLR", "T_max": 1000, "eta_min": 0.1},
            ],
        },
        3000,
        id="ChainedScheduler-cosine",
    ),
]


@pytest.mark.parametrize(("config", "n"), PARITY)
def test_matches_torch_every_batch(config: dict, n: int, state: State) -> None:
    expected = torch_lrs(config, n)
    sched = build(config)
    got = [at(sched, state, t) for t in range(n + 1)]
    # Batch by batch the private scheduler *is* torch's recursion: equal to the bit.
    assert got == expected


@pytest.mark.parametrize(("config", "n"), PARITY)
def test_random_access_is_pure(config: dict, n: int, state: State) -> None:
    expected = torch_lrs(config, n)
    sched = build(config)
    order = [n // 2, 10, n // 2, 0, n, 1, n - 1, *random.Random(0).sample(range(n + 1), 60)]
    for t in order:
        assert at(sched, state, t) == pytest.approx(expected[t], rel=1e-9, abs=0.0), t


@pytest.mark.parametrize(("config", "n"), PARITY)
def test_forward_skips_are_torch_to_the_bit(config: dict, n: int, state: State) -> None:
    # Sampled batches (a plot, an evaluation log): gaps are replayed on a float with torch's own expressions, or
    # stepped across a SequentialLR milestone; either way equal to torch's stepping exactly.
    expected = torch_lrs(config, n)
    rng = random.Random(1)
    t, sched = 0, build(config)
    while t <= n:
        assert at(sched, state, t) == expected[t], t
        t += rng.choice((2, 3, 17, 250, 999, 2500))


def test_fresh_scheduler_at_any_batch_equals_running_there(state: State) -> None:
    expected = torch_lrs(WARMUP_COSINE, 1000)
    for t in (0, 1, 99, 100, 101, 555, 999, 1000):
        assert at(build(WARMUP_COSINE), state, t) == expected[t]


# --------------------------------------------------------------------------------------------------------------
# Far jumps (resume): closed forms and exact counters instead of stepping, continued by stepping.
# --------------------------------------------------------------------------------------------------------------

# Chains that are not a product of closed forms: torch's recursion is replayed on a float (cosine past T_max with
# eta_min, every multiplicative class), or the last child that ignores its input LR (CyclicLR) sets it.
CHAIN_RECURSIVE = {
    "type": "ChainedScheduler",
    "schedulers": [
        {"type": "ConstantLR", "factor": 0.3, "total_iters": 40},
        {"type": "CosineAnnealingLR", "T_max": 9000, "eta_min": 0.05},
        {"type": "StepLR", "step_size": 3000, "gamma": 0.7},
        {"type": "PolynomialLR", "total_iters": 200_000, "power": 1.5},
        {"type": "MultiStepLR", "milestones": [5, 500, 50_000], "gamma": 0.8},
        {"type": "LinearLR", "start_factor": 0.5, "total_iters": 30_000},
        {"type": "ExponentialLR", "gamma": 0.999999},
    ],
}
CHAIN_ABSOLUTE = {
    "type": "ChainedScheduler",
    "schedulers": [
        {"type": "ExponentialLR", "gamma": 0.9999},
        {"type": "CyclicLR", "base_lr": 0.1, "max_lr": 1.0, "step_size_up": 700},
        {"type": "CosineAnnealingLR", "T_max": 3000, "eta_min": 0.1},
        {"type": "CosineAnnealingWarmRestarts", "T_0": 500, "T_mult": 2},
        {"type": "LinearLR", "start_factor": 0.5, "total_iters": 30_000},
    ],
}

FAR = [
    pytest.param({"type": "StepLR", "step_size": 1000, "gamma": 0.99}, id="StepLR"),
    pytest.param({"type": "MultiStepLR", "milestones": [10, 50_000, 90_000], "gamma": 0.5}, id="MultiStepLR"),
    pytest.param({"type": "ConstantLR", "factor": 0.5, "total_iters": 80_000}, id="ConstantLR"),
    pytest.param({"type": "LinearLR", "start_factor": 0.1, "total_iters": 150_000}, id="LinearLR"),
    pytest.param({"type": "ExponentialLR", "gamma": 0.99999}, id="ExponentialLR"),
    pytest.param({"type": "PolynomialLR", "total_iters": 150_000, "power": 0.5}, id="PolynomialLR"),
    pytest.param({"type": "CosineAnnealingLR", "T_max": 3000, "eta_min": 0.01}, id="CosineAnnealingLR"),
    pytest.param({"type": "CosineAnnealingWarmRestarts", "T_0": 700, "T_mult": 3}, id="CAWR"),
    pytest.param({"type": "OneCycleLR", "max_lr": 1.0, "total_steps": 200_000}, id="OneCycleLR"),
    pytest.param({"type": "CyclicLR", "base_lr": 0.1, "max_lr": 1.0, "mode": "triangular2"}, id="CyclicLR"),
    pytest.param(
        {
            "type": "SequentialLR",
            "schedulers": [
                {"type": "LinearLR", "start_factor": 0.1, "total_iters": 1000},
                {"type": "CosineAnnealingLR", "T_max": 99_000},
                {"type": "CosineAnnealingWarmRestarts", "T_0": 7000},
            ],
            "milestones": [1000, 100_000],
        },
        id="SequentialLR",
    ),
    pytest.param(
        {
            "type": "ChainedScheduler",
            "schedulers": [
                {"type": "ConstantLR", "factor": 0.1, "total_iters": 150},
                {"type": "ExponentialLR", "gamma": 0.99999},
                {"type": "StepLR", "step_size": 10_000, "gamma": 0.9},
            ],
        },
        id="ChainedScheduler",
    ),
    pytest.param(
        {
            "type": "ChainedScheduler",
            "schedulers": [
                {"type": "LinearLR", "start_factor": 0.1, "total_iters": 1000},
                {"type": "CosineAnnealingLR", "T_max": 200_000},
            ],
        },
        id="ChainedScheduler-cosine-factor",
    ),
    pytest.param(CHAIN_RECURSIVE, id="ChainedScheduler-recursive"),
    pytest.param(CHAIN_ABSOLUTE, id="ChainedScheduler-absolute"),
]


@pytest.mark.parametrize("config", FAR)
def test_far_jump_equals_stepping(config: dict, state: State) -> None:
    n = 120_000
    expected = torch_lrs(config, n + 20)
    sched = build(config)
    for t in (n, n + 1, n + 2, n + 20, 30_000, n - 50_000):  # forwards from the jump, then backwards far
        assert at(sched, state, t) == pytest.approx(expected[t], rel=1e-9, abs=0.0), t


@pytest.mark.parametrize(
    "config",
    [
        pytest.param({"type": "CosineAnnealingLR", "T_max": 1000}, id="CosineAnnealingLR"),
        pytest.param({"type": "CosineAnnealingWarmRestarts", "T_0": 100, "T_mult": 2}, id="CAWR"),
    ],
)
def test_jump_to_one_million_equals_stepping(config: dict, state: State) -> None:
    n = 1_000_000
    optimizer, sched = _real_torch(config)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n):
            sched.step()
    ours = build(config)
    assert at(ours, state, n) == pytest.approx(optimizer.param_groups[0]["lr"], rel=1e-9, abs=0.0)
    sched.step()
    assert at(ours, state, n + 1) == pytest.approx(optimizer.param_groups[0]["lr"], rel=1e-9, abs=0.0)


@pytest.mark.parametrize("config", [CHAIN_RECURSIVE, CHAIN_ABSOLUTE], ids=["recursive", "absolute"])
def test_chain_fast_forward_is_torch_to_the_bit(config: dict, state: State) -> None:
    # A far jump into a chain replays torch's own float arithmetic, so it equals stepping exactly, not to 1e-9.
    n = 25_000
    expected = torch_lrs(config, n + 3)
    sched = build(config)
    assert [at(sched, state, t) for t in range(n, n + 4)] == expected[n:]
    assert _seek(_fresh(sched.engine._spec), n)  # jumped, not stepped (stepping would be torch too, but ~15 µs a step)


# --------------------------------------------------------------------------------------------------------------
# ssr, warnings, Composer semantics.
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("ssr", "batch", "step"),
    [(1.0, 37, 37), (2.0, 40, 20), (2.0, 41, 20), (0.5, 15, 30), (0.1, 7, 70), (0.3, 3, 10), (1.5, 30, 20)],
)
def test_ssr_scales_the_batch_count(ssr: float, batch: int, step: int, state: State) -> None:
    config = {"type": "CosineAnnealingLR", "T_max": 100}
    assert at(build(config), state, batch, ssr) == torch_lrs(config, step)[step]


def test_no_warnings_on_the_call_path(state: State) -> None:
    sched = build(WARMUP_COSINE)  # crosses SequentialLR's milestone, where torch warns about step(epoch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for t in [*range(300), 5, 50_000, 3]:
            at(sched, state, t)


def test_onecycle_past_total_steps_is_a_config_error(state: State) -> None:
    config = {"type": "OneCycleLR", "max_lr": 1.0, "total_steps": 100}
    # A 101-batch run calls the scheduler up to timestamp 100 (the end of its last batch): OneCycleLR covers it.
    state.max_duration = Time.from_timestring("101ba")
    sched = build(config)
    assert at(sched, state, 100) == torch_lrs(config, 100)[100]
    # One batch more needs step 101: refused at the first call (the Trainer makes it while it is built).
    state.max_duration = Time.from_timestring("102ba")
    with pytest.raises(
        ConfigError, match=r"scheduler\.total_steps: OneCycleLR is defined for 100 steps but the run needs 101"
    ):
        at(build(config), state, 0)


# --------------------------------------------------------------------------------------------------------------
# Config errors.
# --------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "match"),
    [
        pytest.param({"type": "StepLr", "step_size": 1}, r"scheduler\.type: .*did you mean 'StepLR'", id="case"),
        pytest.param({"type": "CosineAnealingLR", "T_max": 1}, r"did you mean 'CosineAnnealingLR'", id="typo"),
        pytest.param({"type": "Warmup"}, r"not a torch\.optim\.lr_scheduler class; supported: ", id="unknown"),
        pytest.param({"type": 3}, r"scheduler\.type: 3 \(int\) is not a string", id="not-str"),
        pytest.param({"type": "ReduceLROnPlateau"}, r"scheduler\.name: reduce_lr_on_plateau", id="plateau"),
        pytest.param({"type": "LambdaLR", "lr_lambda": "x"}, r"LambdaLR is not supported: .*callable", id="lambda"),
        pytest.param({"type": "MultiplicativeLR"}, r"MultiplicativeLR is not supported: .*callable", id="mult"),
        pytest.param(
            {"type": "StepLR", "step_sz": 10},
            r"scheduler\.step_sz: unknown key for StepLR \(did you mean 'step_size'\?\); "
            r"allowed keys: step_size, gamma$",
            id="unknown-kwarg",
        ),
        pytest.param(
            {"type": "StepLR", "gamma": 0.5},
            r"scheduler\.step_size: is required by StepLR; expected an integer >= 1",
            id="missing",
        ),
        pytest.param({"type": "CosineAnnealingLR"}, r"scheduler\.T_max: is required", id="missing-T_max"),
        pytest.param({"type": "StepLR", "step_size": 1, "last_epoch": 5}, r"last_epoch: cannot be set", id="last"),
        pytest.param({"type": "StepLR", "step_size": 1, "optimizer": None}, r"optimizer: cannot be set", id="opt"),
        pytest.param({"type": "StepLR", "step_size": 1, "verbose": True}, r"verbose: cannot be set", id="verbose"),
        pytest.param(
            {"type": "CyclicLR", "base_lr": 0.1, "max_lr": 1.0, "scale_fn": "f"}, r"scale_fn: cannot be set", id="fn"
        ),
        pytest.param(
            {"type": "ConstantLR", "factor": 2.0},
            r"scheduler\.factor: 2\.0 is out of range; expected a number in \(0, 1\]",
            id="factor",
        ),
        pytest.param(
            {"type": "CosineAnnealingLR", "T_max": 0},
            r"scheduler\.T_max: 0 is out of range; expected an integer >= 1",
            id="T_max-0",
        ),
        pytest.param(
            {"type": "OneCycleLR", "max_lr": 1.0},
            r"scheduler\.total_steps: is required \(or both epochs and steps_per_epoch\)",
            id="onecycle",
        ),
        pytest.param(
            {**WARMUP_COSINE, "schedulers": [{"type": "LinearLR"}, {"type": "CosineAnnealingLR", "T_mx": 9}]},
            r"scheduler\.schedulers\[1\]\.T_mx: unknown key .*did you mean 'T_max'",
            id="nested-kwarg",
        ),
        pytest.param(
            {**WARMUP_COSINE, "schedulers": [{"type": "LinearLR"}, {"type": "Cosine"}]},
            r"scheduler\.schedulers\[1\]\.type: 'Cosine' is not a torch",
            id="nested-type",
        ),
        pytest.param(
            {**WARMUP_COSINE, "schedulers": [{"type": "LinearLR"}, {"T_max": 9}]},
            r"scheduler\.schedulers\[1\]\.type: is required",
            id="nested-no-type",
        ),
        pytest.param(
            {"type": "ChainedScheduler", "schedulers": [WARMUP_COSINE]},
            r"SequentialLR cannot be nested",
            id="nested-composite",
        ),
        pytest.param({**WARMUP_COSINE, "milestones": [100, 200]}, r"scheduler\.milestones: .*expected 1", id="ms-len"),
        pytest.param({**WARMUP_COSINE, "milestones": [0]}, r"scheduler\.milestones", id="ms-zero"),
        pytest.param({"type": "SequentialLR", "milestones": []}, r"scheduler\.schedulers: is required", id="no-list"),
    ],
)
def test_config_errors(config: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        build(config)


# --------------------------------------------------------------------------------------------------------------
# llm-foundry registry and YAML.
# --------------------------------------------------------------------------------------------------------------


def test_built_through_llmfoundry_registry_from_yaml(state: State) -> None:
    from llmfoundry.utils.builders import build_scheduler

    yaml = """
    scheduler:
      name: torch_lr_scheduler
      type: SequentialLR
      schedulers:
        - {type: LinearLR, start_factor: 0.1, total_iters: 100}
        - {type: CosineAnnealingLR, T_max: 900}
      milestones: [100]
    """
    cfg = OmegaConf.to_container(OmegaConf.create(yaml))["scheduler"]
    sched = build_scheduler(cfg.pop("name"), cfg)
    assert isinstance(sched, TorchLRScheduler)
    expected = torch_lrs(WARMUP_COSINE, 1000)
    assert [at(sched, state, t) for t in range(1001)] == expected


def test_registry_reports_config_errors() -> None:
    from llmfoundry.utils.builders import build_scheduler

    with pytest.raises(ConfigError, match=r"scheduler\.gama: unknown key .*did you mean 'gamma'"):
        build_scheduler("torch_lr_scheduler", {"type": "StepLR", "step_size": 10, "gama": 0.5})


# --------------------------------------------------------------------------------------------------------------
# A real Trainer.fit(): the optimizer's LR at every batch.
# --------------------------------------------------------------------------------------------------------------


class _RecordLR(Callback):
    def __init__(self) -> None:
        self.lrs: dict[int, float] = {}

    def run_event(self, event: Event, state: State, logger) -> None:
        del logger  # unused
        if event == Event.BATCH_START:
            self.lrs[state.timestamp.batch.value] = state.optimizers[0].param_groups[0]["lr"]


def test_trainer_fit_lr_every_batch(state: State) -> None:
    torch.manual_seed(0)
    model = ComposerClassifier(torch.nn.Linear(4, 2), num_classes=2)
    data = TensorDataset(torch.randn(64, 4), torch.randint(0, 2, (64,)))
    sched = TorchLRScheduler(type="StepLR", step_size=5, gamma=0.5)
    record = _RecordLR()
    trainer = Trainer(
        model=model,
        train_dataloader=DataLoader(data, batch_size=4),
        max_duration="30ba",
        optimizers=torch.optim.SGD(model.parameters(), lr=0.1),
        schedulers=[sched],
        callbacks=[record],
        device="cpu",
        progress_bar=False,
        log_to_console=False,
        loggers=[],
    )
    trainer.fit()
    assert sorted(record.lrs) == list(range(30))
    reference = TorchLRScheduler(type="StepLR", step_size=5, gamma=0.5)
    for k, lr in record.lrs.items():
        # Composer steps the scheduler at the end of batch k-1 *before* the timestamp advances, so batch k trains
        # with the multiplier of batch k-1 (batch 0 with that of batch 0, from LambdaLR's construction).
        assert lr == 0.1 * at(reference, state, max(k - 1, 0)), k
    assert record.lrs[5] == 0.1 and record.lrs[6] == 0.05 and record.lrs[29] == 0.1 * 0.5**5
