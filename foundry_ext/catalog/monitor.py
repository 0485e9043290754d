"""The pre-flight check of a plateau's ``scheduler.monitor``: its evaluator and metric, from the YAML alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from foundry_ext.catalog.findings import Findings
from foundry_ext.config.errors import Problem, did_you_mean
from foundry_ext.schedules.base import ScheduleModel

__all__ = ["EVAL_METRICS", "check_monitor"]

# llm-foundry 0.22: metric registry name -> the class name Composer logs (metrics/<label>/<ClassName>).
_METRIC_CLASSES = {
    "language_cross_entropy": "LanguageCrossEntropy",
    "language_perplexity": "LanguagePerplexity",
    "token_accuracy": "TokenAccuracy",
    "lm_accuracy": "InContextLearningLMAccuracy",
    "lm_expected_calibration_error": "InContextLearningLMExpectedCalibrationError",
    "mc_expected_calibration_error": "InContextLearningMCExpectedCalibrationError",
    "mc_accuracy": "InContextLearningMultipleChoiceAccuracy",
    "qa_accuracy": "InContextLearningGenerationExactMatchAccuracy",
    "masked_accuracy": "MaskedAccuracy",
}
_CAUSAL_LM = (
    "language_cross_entropy", "language_perplexity", "token_accuracy", "lm_accuracy", "lm_expected_calibration_error",
    "mc_expected_calibration_error", "mc_accuracy", "qa_accuracy",
)  # fmt: skip
#: Model family (``model.name``) -> the eval metrics its evaluators report by default (registry names); checked
#: against real llm-foundry models by ``tests/catalog/test_preflight.py``.
EVAL_METRICS: dict[str, tuple[str, ...]] = {
    "mpt_causal_lm": _CAUSAL_LM,
    "hf_causal_lm": _CAUSAL_LM,
    "hf_t5": ("language_cross_entropy", "masked_accuracy"),
}


def check_monitor(model: ScheduleModel, cfg: Mapping[str, Any], found: Findings) -> None:
    """A ``reduce_lr_on_plateau`` monitor against the eval loaders' labels and the model family's metrics."""
    monitor: str = model.monitor  # type: ignore[attr-defined]
    family = cfg.get("model", {}).get("name") if isinstance(cfg.get("model"), Mapping) else None
    family = family if isinstance(family, str) else None  # a list or a mapping there: llm-foundry names it
    if monitor.startswith("loss/train/"):
        if family in EVAL_METRICS and monitor != "loss/train/total":
            found.errors.append(
                Problem("scheduler.monitor", f"{monitor!r}: {family} logs one train loss, 'loss/train/total'")
            )
        return
    loaders = cfg.get("eval_loader") or cfg.get("eval_loaders")
    if not loaders and not cfg.get("icl_tasks"):
        found.errors.append(
            Problem(
                "scheduler.monitor",
                f"{monitor!r} is an eval metric but the config has no eval_loader; add one, or monitor a train loss: "
                "monitor: loss/train/total with check_interval: 100ba",
            )
        )
        return
    label, _, metric = monitor[len("metrics/") :].rpartition("/")
    if loaders and not cfg.get("icl_tasks"):  # ICL labels come from the task files: not checked here
        if isinstance(loaders, Mapping):
            labels = ["eval"]
        else:
            labels = [f"eval/{loader.get('label')}" for loader in loaders if isinstance(loader, Mapping)]
        if label not in labels:
            found.errors.append(
                Problem(
                    "scheduler.monitor",
                    f"{monitor!r} names evaluator {label!r}, but the eval loaders are labelled "
                    f"{', '.join(repr(x) for x in labels)} (metrics/<label>/<metric>)",
                )
            )
            return
    if family not in EVAL_METRICS:
        found.notes.append(
            f"scheduler.monitor: model {family!r} is not one whose metrics are known here; the metric "
            "name is checked when training starts, before the first batch"
        )
        return
    model_cfg = cfg["model"]
    extra = [*(model_cfg.get("additional_train_metrics") or []), *(model_cfg.get("additional_eval_metrics") or [])]
    names = [_METRIC_CLASSES.get(m, m) for m in (*EVAL_METRICS[family], *extra)]
    if metric not in names:
        found.errors.append(
            Problem(
                "scheduler.monitor",
                f"{monitor!r}: {family} reports no {metric!r}{did_you_mean(metric, names)}; it reports "
                f"{', '.join(f'metrics/{label}/{n}' for n in names)}",
            )
        )
