"""``LAW.json``: a fitted law, its version, and how well it fitted; read back with every value checked."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

from foundry_ext.law.fit import FitResult
from foundry_ext.law.forms import FORMS

__all__ = ["VERSION", "LawFileError", "read_law", "write_law"]

VERSION = 1


class LawFileError(ValueError):
    """A LAW.json that cannot be used: one line naming the file, the field and what is allowed."""


def write_law(path: str, result: FitResult, sources: list[str]) -> None:
    """Write ``result`` to ``path``."""
    doc = {
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
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


def read_law(path: str) -> tuple[str, list[float]]:
    """The form and parameters (in :data:`~foundry_ext.law.multipower.NAMES` order) of a LAW.json."""
    try:
        with open(path) as f:
            doc: Any = json.load(f)
    except OSError as e:
        raise LawFileError(f"{path}: cannot read: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise LawFileError(f"{path}: not JSON ({e.msg} at line {e.lineno})") from None
    if not isinstance(doc, dict) or "foundry_ext_law" not in doc:
        raise LawFileError(f"{path}: not a LAW.json of `foundry-ext law fit` (no 'foundry_ext_law' version)")
    if doc["foundry_ext_law"] != VERSION:
        raise LawFileError(
            f"{path}: foundry_ext_law {doc['foundry_ext_law']!r} is another version; this foundry-ext reads "
            f"version {VERSION}: fit again with `foundry-ext law fit`"
        )
    form = doc.get("form")
    if not isinstance(form, str) or form not in FORMS:
        raise LawFileError(f"{path}: form {form!r} is unknown; expected one of {', '.join(FORMS)}")
    names = FORMS[form].names
    ranges = FORMS[form].ranges()
    params = doc.get("params")
    if not isinstance(params, dict):
        raise LawFileError(f"{path}: params must be an object with {', '.join(names)}")
    values = []
    for name in names:
        value = params.get(name)
        lo, hi = ranges[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise LawFileError(f"{path}: params.{name} {value!r} is not a finite number")
        if not lo <= value <= hi:
            raise LawFileError(f"{path}: params.{name} {value!r} is out of range; expected {lo:g} <= {name} <= {hi:g}")
        values.append(float(value))
    unknown = sorted(set(params) - set(names))
    if unknown:
        raise LawFileError(f"{path}: params.{unknown[0]} is not a parameter of the {form} law ({', '.join(names)})")
    return form, values
