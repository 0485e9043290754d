"""The plateau's ``base`` schedule: a YAML block built through llm-foundry's scheduler registry."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import catalogue
from composer.optim import ComposerScheduler

from foundry_ext.config.errors import ConfigError, not_a_scheduler, yaml_path

__all__ = ["build_base"]


def build_base(block: Mapping[str, Any], path: str) -> ComposerScheduler:
    """Build a ``base`` scheduler block through llm-foundry's registry (this package's names included)."""
    from llmfoundry import registry  # slow import: only when a base is configured

    config = dict(block)
    name = config.pop("name")
    try:
        cls = registry.schedulers.get(name)
    except catalogue.RegistryError:
        names = sorted(registry.schedulers.get_all())
        raise ConfigError(f"{path}.name", not_a_scheduler(name, names)) from None
    with yaml_path(path):
        try:
            return cls(**config)
        except TypeError as e:  # a third-party class that does not validate its keys
            raise ConfigError(path, f"{name} rejected its keys: {e}") from None
