"""docs/plateau.md's translation from Keras's ReduceLROnPlateau, checked against real Keras (3.15, torch backend).

Keras (``keras/src/callbacks/reduce_lr_on_plateau.py``, identical in v3.15.1 and keras-team/keras master at
3422977a) judges an evaluation after decrementing its cooldown, cuts when ``wait >= patience``, and resets ``wait``
and starts the cooldown only when the LR actually dropped (``old_lr > float32(min_lr)``); it has no ``eps``. So
Keras ``patience p, cooldown c, min_delta d`` is ours ``patience max(p - 1, 0), cooldown max(c - 1, 0),
threshold d, threshold_mode abs, eps 0``. The callback is driven directly with ``on_epoch_end`` on a stand-in model
whose optimizer holds a float ``learning_rate``, which is all Keras reads and writes.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from foundry_ext.schedules.plateau_rule import PlateauRule, PlateauState

os.environ.setdefault("KERAS_BACKEND", "torch")  # the stack's torch; no TensorFlow or JAX
keras_callbacks = pytest.importorskip("keras.callbacks", reason="keras is in the [test] extras")

BASE_LR = 0.1


class _Optimizer:
    def __init__(self, lr: float) -> None:
        self.learning_rate = lr


class _Model:
    def __init__(self, lr: float) -> None:
        self.optimizer = _Optimizer(lr)


def keras_lrs(values: list[float], lr: float = BASE_LR, **kwargs: object) -> tuple[list[float], list[int]]:
    """The LR after each evaluation, and Keras's ``wait``, from the real keras.callbacks.ReduceLROnPlateau."""
    model = _Model(lr)
    callback = keras_callbacks.ReduceLROnPlateau(monitor="val_loss", **kwargs)
    callback.set_model(model)
    callback.on_train_begin()
    lrs, waits = [], []
    for epoch, value in enumerate(values):
        callback.on_epoch_end(epoch, {"val_loss": value})
        lrs.append(float(model.optimizer.learning_rate))
        waits.append(callback.wait)
    return lrs, waits


def our_lrs(values: list[float], rule: PlateauRule, lr: float = BASE_LR) -> tuple[list[float], list[int]]:
    state = PlateauState()
    lrs, bad = [], []
    for value in values:
        rule.step(state, value, [lr])
        lrs.append(lr * state.scale)
        bad.append(state.num_bad_evals)
    return lrs, bad


def translate(mode: str, factor: float, patience: int, cooldown: int, min_delta: float, min_lr: float) -> PlateauRule:
    """docs/plateau.md's table: Keras's arguments -> ours."""
    return PlateauRule(mode=mode, factor=factor, patience=max(patience - 1, 0), cooldown=max(cooldown - 1, 0),
                       threshold=min_delta, threshold_mode="abs", min_lr=min_lr, eps=0.0)  # fmt: skip


keras_params = st.fixed_dictionaries(
    {
        "mode": st.sampled_from(["min", "max"]),
        "factor": st.sampled_from([0.1, 0.5, 0.8]),
        "patience": st.integers(0, 4),
        "cooldown": st.integers(0, 3),
        "min_delta": st.sampled_from([0.0, 1e-4, 0.5]),
        "min_lr": st.sampled_from([0.0, 1e-3, 0.02]),
    }
)


@settings(max_examples=300, deadline=None)
@given(params=keras_params, values=st.lists(st.integers(1, 6).map(float), min_size=1, max_size=60))
def test_translated_settings_give_keras_lr_after_every_evaluation(params: dict, values: list[float]) -> None:
    want, _ = keras_lrs(values, **params)
    got, _ = our_lrs(values, translate(**params))
    assert got == pytest.approx(want, rel=1e-9), values


def test_keras_cooldown_ignores_one_evaluation_fewer() -> None:
    """Keras cooldown 2 ignores 1 bad evaluation after a cut; ours cooldown 2 ignores 2 (torch's rule)."""
    values = [3.0] * 9
    keras, _ = keras_lrs(values, mode="min", factor=0.5, patience=1, cooldown=2, min_delta=0.0)
    ours_naive, _ = our_lrs(values, PlateauRule(mode="min", factor=0.5, patience=0, cooldown=2, eps=0.0))
    ours, _ = our_lrs(values, translate("min", 0.5, 1, 2, 0.0, 0.0))
    assert keras == [0.1, 0.05, 0.05, 0.025, 0.025, 0.0125, 0.0125, 0.00625, 0.00625]
    assert ours == keras
    assert ours_naive == [0.1, 0.05, 0.05, 0.05, 0.025, 0.025, 0.025, 0.0125, 0.0125]  # cooldown 2 is one too many


def test_keras_keeps_counting_at_the_floor() -> None:
    """At min_lr Keras does not reset wait (no LR dropped); torch and ours reset at every cut decision."""
    values = [3.0] * 6
    keras, waits = keras_lrs(values, mode="min", factor=0.5, patience=1, min_lr=0.05, min_delta=0.0)
    ours, bad = our_lrs(values, translate("min", 0.5, 1, 0, 0.0, 0.05))
    assert keras == ours == [0.1, 0.05, 0.05, 0.05, 0.05, 0.05]  # the same LRs ...
    assert waits == [0, 0, 1, 2, 3, 4] and bad == [0, 0, 0, 0, 0, 0]  # ... but not the same counter


def test_eps_skips_cuts_that_keras_makes() -> None:
    """torch's and our default eps 1e-8 skips a cut that lowers the LR by 1e-8 or less; Keras has no eps."""
    values = [3.0] * 4
    keras, _ = keras_lrs(values, lr=1e-8, mode="min", factor=0.5, patience=1, min_delta=0.0)
    default, _ = our_lrs(values, PlateauRule(mode="min", factor=0.5, patience=0), lr=1e-8)  # eps 1e-8
    translated, _ = our_lrs(values, translate("min", 0.5, 1, 0, 0.0, 0.0), lr=1e-8)  # eps 0
    assert keras == translated == pytest.approx([1e-8, 5e-9, 2.5e-9, 1.25e-9], rel=1e-12)
    assert default == [1e-8] * 4  # each cut would lower the LR by at most 5e-9: skipped
