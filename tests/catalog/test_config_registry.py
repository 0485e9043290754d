"""The config models agree with what they describe: llm-foundry's registries, Composer's and torch's signatures."""

from __future__ import annotations

import inspect
from importlib.metadata import entry_points
from typing import Any

import pytest
from llmfoundry import registry
from pydantic_core import PydanticUndefined
from torch.optim import lr_scheduler as torch_lr

from foundry_ext.catalog.monitor import _METRIC_CLASSES, EVAL_METRICS
from foundry_ext.catalog.registry import CALLBACK_MODELS, FOUNDRY_CALLBACKS, SCHEDULE_MODELS
from foundry_ext.config.durations import Duration
from foundry_ext.schedules.torch import REFUSED, RESERVED, TORCH_MODELS


def signature(cls: Any) -> dict[str, Any]:
    """Parameter name -> default (``inspect.Parameter.empty`` when required), looking through llm-foundry's wrappers."""
    target = cls.__init__
    for cell in getattr(target, "__closure__", None) or ():  # llm-foundry's @experimental_class wraps __init__
        if inspect.isfunction(cell.cell_contents) and cell.cell_contents.__name__ == "__init__":
            target = cell.cell_contents
    params = inspect.signature(target).parameters.values()
    return {p.name: p.default for p in params if p.name != "self" and p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)}


def model_defaults(model: Any) -> dict[str, Any]:
    out = {}
    for name, info in model.model_fields.items():
        default = info.default
        out[name] = inspect.Parameter.empty if default is PydanticUndefined else default
    return out


def same(ours: Any, theirs: Any) -> bool:
    if isinstance(ours, Duration):
        return str(ours) == str(theirs) or (isinstance(theirs, str) and Duration.of(theirs) == ours)
    return ours == theirs


def test_scheduler_names_are_llm_foundry_s_registry() -> None:
    assert set(SCHEDULE_MODELS) == set(registry.schedulers.get_all())


def test_entry_points_are_the_models_of_this_package() -> None:
    declared = {
        ep.name: ep.value for ep in entry_points(group="llmfoundry_schedulers") if ep.dist.name == "foundry-ext"
    }
    ours = {name: m.adapter for name, m in SCHEDULE_MODELS.items() if m.provider == "foundry-ext"}
    assert declared == ours


@pytest.mark.parametrize("name", sorted(SCHEDULE_MODELS))
def test_keys_and_defaults_are_the_classes(name: str) -> None:
    """Every key is an argument of the class llm-foundry builds, with the same default (Composer's classes too)."""
    model = SCHEDULE_MODELS[name]
    cls = registry.schedulers.get(name)
    if model.provider == "foundry-ext" and name not in ("torch_lr_scheduler",):
        composer_base = cls.__mro__[1] if cls.__module__.endswith("schedulers.composer") else None
        if composer_base is None:
            assert cls.Config is model
            return
        cls = composer_base  # the names this package registers for Composer's classes: compare with Composer's
    if name == "torch_lr_scheduler":
        return  # per torch class: test_torch_models_are_torch_s_signatures
    theirs = signature(cls)
    ours = model_defaults(model)
    assert list(ours) == list(theirs), name
    for key, default in ours.items():
        assert same(default, theirs[key]), (name, key, default, theirs[key])


@pytest.mark.parametrize("name", sorted(TORCH_MODELS))
def test_torch_models_are_torch_s_signatures(name: str) -> None:
    theirs = {k: v for k, v in signature(getattr(torch_lr, name)).items() if k not in ("optimizer", *RESERVED)}
    ours = {k: v for k, v in model_defaults(TORCH_MODELS[name]).items() if k != "type"}
    assert list(ours) == list(theirs)
    for key, default in ours.items():
        assert default == theirs[key], (name, key)


def test_every_torch_class_is_modelled_or_refused_with_a_reason() -> None:
    assert set(TORCH_MODELS) | set(REFUSED) == set(torch_lr.__all__)


def test_foundry_callbacks_table_is_llm_foundry_s_registry() -> None:
    found: dict[str, Any] = {}
    for reg in (registry.callbacks, registry.callbacks_with_config):
        for name, cls in reg.get_all().items():
            if name in CALLBACK_MODELS or cls.__module__.split(".")[0] not in ("llmfoundry", "composer"):
                continue  # ours, and those benchmarks register in this process (bench/_common.py)
            target = cls.__init__
            for cell in getattr(target, "__closure__", None) or ():
                if inspect.isfunction(cell.cell_contents) and cell.cell_contents.__name__ == "__init__":
                    target = cell.cell_contents
            params = [p for n, p in inspect.signature(target).parameters.items() if n not in ("self", "train_config")]
            if any(p.kind is p.VAR_KEYWORD for p in params):
                found[name] = None
                continue
            found[name] = (
                tuple(p.name for p in params if p.default is p.empty and p.kind is not p.VAR_POSITIONAL),
                tuple(p.name for p in params if p.default is not p.empty),
            )
    assert found == FOUNDRY_CALLBACKS


def test_eval_metric_names_are_the_model_s() -> None:
    """The monitor check's table: a real tiny MPT's eval metrics, and hf_causal_lm's and hf_t5's declared defaults."""
    from llmfoundry.metrics import DEFAULT_CAUSAL_LM_EVAL_METRICS, DEFAULT_ENC_DEC_METRICS
    from llmfoundry.models.hf.hf_causal_lm import ComposerHFCausalLM
    from llmfoundry.models.mpt import ComposerMPTCausalLM

    for metric, class_name in _METRIC_CLASSES.items():
        assert registry.metrics.get(metric).__name__ == class_name
    mpt = ComposerMPTCausalLM(
        d_model=16,
        n_heads=2,
        n_layers=1,
        max_seq_len=16,
        vocab_size=32,
        attn_config={"attn_impl": "torch"},
        loss_fn="torch_crossentropy",
    )
    assert sorted(mpt.get_metrics(is_train=False)) == sorted(_METRIC_CLASSES[m] for m in EVAL_METRICS["mpt_causal_lm"])
    assert (
        tuple(ComposerHFCausalLM.default_eval_metrics)
        == EVAL_METRICS["hf_causal_lm"]
        == tuple(DEFAULT_CAUSAL_LM_EVAL_METRICS)
    )
    assert tuple(DEFAULT_ENC_DEC_METRICS) == EVAL_METRICS["hf_t5"]
