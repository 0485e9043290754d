"""``LAW.json``: a fitted law, its version, how well it fitted, how sure it is; read back with every value checked.

Version 1. ``reliability`` (the leave-one-run-out checks, the verdict and the sub-fits' parameters) and ``domain``
(what the law was fitted on) are optional keys: a file written before them still reads (its law "not checked"), and
a reader that does not know them ignores them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from foundry_ext.law.fit import FitResult
from foundry_ext.law.forms import FORMS

if TYPE_CHECKING:
    import numpy as np

__all__ = ["MAX_BYTES", "VERSION", "Law", "LawFileError", "law_curve", "read_law", "read_law_file", "write_law"]

VERSION = 1
MAX_BYTES = 16 * 1024 * 1024  # a LAW.json is a few kB; more is not one
_DOMAIN_KEYS = ("peak_lr", "batches", "lr_area", "warmup", "loss")


class LawFileError(ValueError):
    """A LAW.json that cannot be used: one line naming the file, the field and what is allowed."""


@dataclass
class Law:
    """A LAW.json as read: the form and parameters, and what is known of how sure it is (None: not recorded)."""

    path: str
    form: str
    params: list[float]
    verdict: str | None = None
    reason: str = ""
    train_mean_rel: float | None = None
    subfits: list[list[float]] = field(default_factory=list)
    model_error: float = 0.0  # the band's relative error term (reliability.model_error), from the recorded checks
    domain: Any = None  # reliability.Domain
    edited: str = ""  # a warning: the recorded verdict is better than its evidence gives (a hand edit)


def write_law(path: str, result: FitResult, sources: list[str], reliability: Any = None, domain: Any = None) -> None:
    """Write ``result`` (and its :class:`~foundry_ext.law.reliability.Reliability` and domain) to ``path``."""
    names = FORMS[result.form].names
    doc: dict[str, Any] = {
        "foundry_ext_law": VERSION,
        "form": result.form,
        "params": result.params,
        "fit": {
            "runs": [asdict(r) for r in result.runs],
            "sources": sources,
            "seconds": round(result.seconds, 3),
            "starts": result.starts,
        },
    }
    if domain is not None:
        doc["domain"] = {k: list(getattr(domain, k)) for k in _DOMAIN_KEYS}
    if reliability is not None:
        r = reliability
        doc["reliability"] = {
            "verdict": r.verdict,
            "reason": r.reason,
            "train_mean_rel": r.train_mean_rel,
            "train_worst_rel": r.train_worst_rel,
            "held_out_mean_rel": r.held_out_mean_rel,
            "decaying_runs": r.decaying_runs,
            "runs": r.runs,
            "checks": [
                {k: v for k, v in asdict(c).items() if k != "params"}
                | ({"params": dict(zip(names, c.params, strict=True))} if c.params else {})
                for c in r.checks
            ],
        }
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


def _load(path: str) -> Any:
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_BYTES + 1)
    except IsADirectoryError:
        raise LawFileError(f"{path}: is a folder; expected a LAW.json file written by `foundry-ext law fit`") from None
    except OSError as e:
        raise LawFileError(f"{path}: cannot read: {e.strerror}") from None
    if len(raw) > MAX_BYTES:
        raise LawFileError(f"{path}: larger than {MAX_BYTES // 2**20} MiB; a LAW.json is a few kB")
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(raw) > 1 and b"\x00" in raw[:2]):
        raise LawFileError(f"{path}: UTF-16 text; a LAW.json is UTF-8 (save it as UTF-8)")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise LawFileError(f"{path}: not UTF-8 text (byte {e.start}); a LAW.json is UTF-8 JSON") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise LawFileError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    except RecursionError:
        raise LawFileError(f"{path}: JSON nested too deep; a LAW.json is an object of a few levels") from None
    except ValueError:  # Python's "Exceeds the limit (4300 digits) for integer string conversion", in our words
        raise LawFileError(
            f"{path}: not usable JSON (a number of more than 4,300 digits; a LAW.json holds numbers of a few digits)"
        ) from None


def _finite(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an int beyond a float
        return False


def _params(path: str, key: str, form: str, params: Any) -> list[float]:
    names = FORMS[form].names
    ranges = FORMS[form].ranges()
    if not isinstance(params, dict):
        raise LawFileError(f"{path}: {key} must be an object with {', '.join(names)}")
    values = []
    for name in names:
        value = params.get(name)
        lo, hi = ranges[name]
        if not _finite(value):
            shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:37]}..."
            raise LawFileError(f"{path}: {key}.{name} {shown} is not a finite number")
        if not lo <= value <= hi:
            raise LawFileError(f"{path}: {key}.{name} {value!r} is out of range; expected {lo:g} <= {name} <= {hi:g}")
        values.append(float(value))
    unknown = sorted(set(params) - set(names))
    if unknown:
        raise LawFileError(f"{path}: {key}.{unknown[0]} is not a parameter of the {form} law ({', '.join(names)})")
    return values


def read_law(path: str) -> tuple[str, list[float]]:
    """The form and parameters (in the form's :attr:`~foundry_ext.law.forms.Form.names` order) of a LAW.json."""
    law = read_law_file(path)
    return law.form, law.params


def read_law_file(path: str) -> Law:
    """A LAW.json with its optional ``reliability`` and ``domain`` checked (one line naming the key if wrong)."""
    from foundry_ext.law.reliability import VERDICTS, Domain, judge, model_error

    doc = _load(path)
    if not isinstance(doc, dict) or "foundry_ext_law" not in doc:
        raise LawFileError(f"{path}: not a LAW.json of `foundry-ext law fit` (no 'foundry_ext_law' version)")
    version = doc["foundry_ext_law"]
    if isinstance(version, bool) or version != VERSION:
        shown = repr(version) if len(repr(version)) <= 40 else f"{repr(version)[:37]}..."
        raise LawFileError(
            f"{path}: foundry_ext_law {shown} is another version; this foundry-ext reads "
            f"version {VERSION}: fit again with `foundry-ext law fit`"
        )
    form = doc.get("form")
    if not isinstance(form, str) or form not in FORMS:
        shown = repr(form) if len(repr(form)) <= 40 else f"{repr(form)[:37]}..."
        raise LawFileError(f"{path}: form {shown} is unknown; expected one of {', '.join(FORMS)}")
    law = Law(path, form, _params(path, "params", form, doc.get("params")))
    if "domain" in doc:
        dom = doc["domain"]
        if not isinstance(dom, dict):
            raise LawFileError(f"{path}: domain must be an object with {', '.join(_DOMAIN_KEYS)}")
        spans = {}
        for k in _DOMAIN_KEYS:
            v = dom.get(k)
            if not (isinstance(v, list) and len(v) == 2 and all(_finite(x) and x >= 0 for x in v) and v[0] <= v[1]):
                raise LawFileError(f"{path}: domain.{k} must be [lowest, highest], two finite numbers >= 0")
            spans[k] = (float(v[0]), float(v[1]))
        law.domain = Domain(**spans)
    if "reliability" in doc:
        r = doc["reliability"]
        if not isinstance(r, dict):
            raise LawFileError(f"{path}: reliability must be an object (written by `foundry-ext law fit`)")
        if r.get("verdict") not in VERDICTS:
            shown = repr(r.get("verdict"))[:40]
            raise LawFileError(f"{path}: reliability.verdict {shown} is not one of {', '.join(VERDICTS)}")
        train = r.get("train_mean_rel")
        if not _finite(train) or not 0 <= train < 1:
            raise LawFileError(f"{path}: reliability.train_mean_rel {repr(train)[:40]} must be a number in [0, 1)")
        checks = r.get("checks", [])
        if not isinstance(checks, list):
            raise LawFileError(f"{path}: reliability.checks must be a list")
        for i, c in enumerate(checks):
            if not isinstance(c, dict):
                raise LawFileError(f"{path}: reliability.checks[{i}] must be an object")
            if "params" in c:
                law.subfits.append(_params(path, f"reliability.checks[{i}].params", form, c["params"]))
            for k in ("mean_rel", "worst_rel", "final_rel"):
                v = c.get(k)
                if v is not None and (not _finite(v) or v < 0):
                    shown = repr(v)[:40]
                    raise LawFileError(f"{path}: reliability.checks[{i}].{k} {shown} must be a number >= 0 or null")
        held = r.get("held_out_mean_rel")
        if held is not None and (not _finite(held) or held < 0):
            raise LawFileError(f"{path}: reliability.held_out_mean_rel {repr(held)[:40]} must be a number >= 0 or null")
        counts = {}
        for k in ("decaying_runs", "runs"):
            v = r.get(k)
            if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= 10_000:
                raise LawFileError(f"{path}: reliability.{k} {repr(v)[:40]} must be an integer in 0..10000")
            counts[k] = v
        law.verdict = r["verdict"]
        law.reason = r.get("reason") if isinstance(r.get("reason"), str) else ""
        law.train_mean_rel = float(train)
        law.model_error = model_error(float(train), [c for c in checks if isinstance(c, dict)])
        unchecked = sum(1 for c in checks if isinstance(c, dict) and c.get("checkable") is False)
        derived, _ = judge(float(train), None if held is None else float(held), counts["decaying_runs"],
                           counts["runs"], unchecked)  # fmt: skip
        if VERDICTS.index(derived) > VERDICTS.index(law.verdict):
            law.edited = (
                f"{path}: reliability.verdict {law.verdict!r} does not follow from its recorded evidence "
                f"({derived!r} by this foundry-ext's thresholds): treated as {derived!r}"
            )
            law.verdict, law.reason = derived, law.edited
    return law


def law_curve(path: str, every_lr: np.ndarray, xs: Sequence[int]) -> tuple[list[int], list[float], str]:
    """The loss a LAW.json predicts after each batch of ``xs`` (``x + 1`` batches trained), from every batch's LR.

    Returns:
        The batch counts, the losses and the law's form. Raises ``LawFileError`` for an unreadable file.
    """
    import numpy as np

    from foundry_ext.law.predict import predict

    form, params = read_law(path)
    steps = np.asarray(xs, dtype=np.int64) + 1
    loss = predict(form, params, np.asarray(every_lr), steps).tolist()
    return [int(s) for s in steps], loss, form
