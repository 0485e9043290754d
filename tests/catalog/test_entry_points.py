"""Every entry point the installed distribution declares reaches llm-foundry's registry as the class it names."""

from __future__ import annotations

from importlib.metadata import EntryPoint, distribution

import pytest
from composer.optim import ComposerScheduler
from llmfoundry import registry


def _declared(group: str) -> list[EntryPoint]:
    return sorted((ep for ep in distribution("foundry-ext").entry_points if ep.group == group), key=lambda e: e.name)


SCHEDULERS = _declared("llmfoundry_schedulers")
CALLBACKS = _declared("llmfoundry_callbacks")


def test_the_package_declares_its_plugins() -> None:
    assert "warmup_stable_decay" in {ep.name for ep in SCHEDULERS}
    assert "reduce_lr_on_plateau" in {ep.name for ep in CALLBACKS}


@pytest.mark.parametrize("ep", SCHEDULERS, ids=lambda ep: ep.name)
def test_scheduler_entry_point_is_registered(ep: EntryPoint) -> None:
    cls = ep.load()
    assert registry.schedulers.get(ep.name) is cls
    assert isinstance(cls, type) and issubclass(cls, ComposerScheduler)


@pytest.mark.parametrize("ep", CALLBACKS, ids=lambda ep: ep.name)
def test_callback_entry_point_is_registered(ep: EntryPoint) -> None:
    assert registry.callbacks.get(ep.name) is ep.load()
