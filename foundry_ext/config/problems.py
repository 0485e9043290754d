"""A pydantic validation error as the YAML's problems: one line each, naming the key's path and what is allowed.

``<path>.<key>: <problem>; <what is allowed>``: pydantic's error location is mapped to the YAML path
(``scheduler.schedulers[1].T_max``, a union's member by its tag), its error kind to this package's wording
(:func:`problems_of`), and a field's annotation to the text of what it allows (:func:`allowed_text`, also read by the
docs' key tables and ``foundry-ext schedulers``). Every problem of a block is reported together.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterable
from typing import Annotated, Any, Literal, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ValidationError

from foundry_ext.config.durations import EXAMPLES
from foundry_ext.config.errors import ConfigError, Problem, did_you_mean, join_path

__all__ = ["allowed_text", "problems_of"]


def problems_of(error: ValidationError, model: type[BaseModel], path: str) -> list[Problem]:
    """One :class:`Problem` per pydantic error, ``<path>.<key>: <problem>; <what is allowed>``."""
    problems: list[Problem] = []
    errors = _most_specific(error.errors(include_url=False))
    for e in errors:
        loc, field_model, annotation, info = _locate(model, e["loc"])
        ctx = e.get("ctx") or {}
        cause = ctx.get("error")
        if isinstance(cause, ConfigError):  # a cross-field check names its own (relative) fields
            problems += [
                Problem(join_path(join_path(path, loc), [p.field] if p.field else []), p.message)
                for p in cause.problems
            ]
            continue
        if e["type"] in ("union_tag_invalid", "union_tag_not_found"):  # the problem is the tag key itself
            loc = [*loc, str(ctx.get("discriminator", "type")).strip("'")]
        problem = Problem(join_path(path, loc), _message(e, field_model, annotation, info, loc))
        if problems and _same_value_refused(problems[-1], problem):
            problem = _either(problems.pop(), problem)  # one value, one mistake: one line
        problems.append(problem)
    return problems


def _same_value_refused(last: Problem, problem: Problem) -> bool:
    """Whether two members of one union (``float | list[float]``) refused the same value of the same field."""
    value = last.message.partition(" is not ")[0]
    return last.field == problem.field and " is not " in last.message and problem.message.startswith(f"{value} is not ")


def _either(first: Problem, second: Problem) -> Problem:
    """``'x' (str) is not a number; expected A`` and ``... is not a list; expected B`` as one line."""
    head1, _, tail1 = first.message.partition("; expected ")
    head2, _, tail2 = second.message.partition("; expected ")
    what = head2.partition(" is not ")[2]
    tails = " or ".join(t for t in (tail1, tail2) if t)
    return Problem(first.field, f"{head1} or {what}" + (f"; expected {tails}" if tails else ""))


def _most_specific(errors: list[Any]) -> list[Any]:
    """Of the errors one value got from each member of a union, keep those of the member it came closest to.

    ``min_lr: [.nan]`` fails ``float`` (it is a list) and ``list[float]`` at item 0 (not finite): only the second
    says what is wrong. An error is dropped when another error of the same field reaches deeper into the value.
    """
    kept = []
    for e in errors:
        loc = tuple(e["loc"])
        deeper = [
            o for o in errors
            if o is not e and len(o["loc"]) > len(loc) and tuple(o["loc"][: len(loc) - 1]) == loc[:-1]
            and isinstance(loc[-1], str) and isinstance(o["loc"][len(loc) - 1], str)
            and o["loc"][len(loc) - 1] != loc[-1]
            and e["type"].endswith("_type")
        ]  # fmt: skip
        if not deeper:
            kept.append(e)
    return kept or errors


def _locate(model: type[BaseModel], raw_loc: Iterable[Any]) -> tuple[list[Any], type[BaseModel] | None, Any, Any]:
    """Walk ``raw_loc`` through the model's fields.

    Returns:
        The YAML location (union tags dropped), the innermost model, and the annotation and FieldInfo of the last
        field reached.
    """
    loc: list[Any] = []
    current: Any = model
    annotation: Any = model
    info: Any = None
    owner: type[BaseModel] | None = model
    for part in raw_loc:
        if isinstance(part, int):
            loc.append(part)
            annotation = _item(annotation)
            current = _model_in(annotation)
            if current is not None:
                owner = current
            continue
        if isinstance(current, type) and issubclass(current, BaseModel) and part in current.model_fields:
            owner = current
            info = current.model_fields[part]
            annotation = info.annotation
            loc.append(part)
            current = _model_in(annotation)
            continue
        # a discriminated union's tag (the class name) or a function-validator label: not a YAML key
        tagged = _union_member(annotation, part)
        if tagged is not None:
            current = owner = tagged
            annotation = tagged
            continue
        if part in ("function-plain", "function-after", "function-before", "function-wrap", "list", "dict"):
            continue
        if isinstance(current, type) and issubclass(current, BaseModel) and _strip(annotation) is not current:
            # an unknown key inside an optional block (``X | None``): pydantic names no branch there
            owner = current
            loc.append(part)
            continue
        if _is_union(annotation) and isinstance(part, str):
            # a plain union's member label ('float', 'list[float]'): pydantic's name for the branch, not a YAML key
            annotation = _union_branch(annotation, part)
            continue
        loc.append(part)
    return loc, owner, annotation, info


def _is_union(annotation: Any) -> bool:
    return get_origin(_strip(annotation)) in (typing.Union, types.UnionType)


def _union_branch(annotation: Any, label: str) -> Any:
    """The member of a union that pydantic labels ``label`` (``list[float]`` -> the list member), else the union."""
    for arg in get_args(_strip(annotation)):
        origin = get_origin(_strip(arg))
        if label.startswith("list[") and origin in (list, tuple):
            return arg
        if not label.startswith("list[") and origin not in (list, tuple) and _strip(arg) is not type(None):
            return arg
    return annotation


def _strip(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _item(annotation: Any) -> Any:
    annotation = _strip(annotation)
    if get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in get_args(annotation):
            if get_origin(_strip(arg)) in (list, tuple):
                return _item(arg)
        return annotation
    args = get_args(annotation)
    return args[0] if get_origin(annotation) in (list, tuple) and args else annotation


def _model_in(annotation: Any) -> Any:
    annotation = _strip(annotation)
    if get_origin(annotation) in (typing.Union, types.UnionType):  # an optional block, ``Model | None``
        models = [a for a in map(_strip, get_args(annotation)) if isinstance(a, type) and issubclass(a, BaseModel)]
        return models[0] if len(models) == 1 else None
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _union_member(annotation: Any, tag: Any) -> type[BaseModel] | None:
    for arg in get_args(_strip(annotation)):
        arg = _strip(arg)
        if isinstance(arg, type) and issubclass(arg, BaseModel) and arg.__name__ == tag:
            return arg
        member = _union_member(arg, tag)
        if member is not None:
            return member
    return None


_KINDS = {
    "float_type": "a number",
    "int_type": "an integer",
    "bool_type": "a boolean",
    "string_type": "a string",
    "list_type": "a list",
    "tuple_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "literal_error": "allowed",
}
_RANGES = ("greater_than", "greater_than_equal", "less_than", "less_than_equal", "too_short", "too_long")


def _message(e: Any, model: type[BaseModel] | None, annotation: Any, info: Any, loc: list[Any]) -> str:
    kind, value = e["type"], e.get("input")
    allowed = allowed_text(annotation, info)
    tail = f"; {allowed}" if allowed else ""
    owner = getattr(model, "key_owner", None)
    of = f" by {owner}" if owner else ""
    if kind == "missing":
        return f"is required{of}{tail}"
    if kind == "extra_forbidden":
        hidden = getattr(model, "hidden_keys", ())
        keys = [k for k in model.model_fields if k not in hidden] if model is not None else []
        name = str(loc[-1]) if loc else ""
        reserved = getattr(model, "reserved_keys", {})
        if name in reserved:
            return f"cannot be set: {reserved[name]}"
        shown = f"allowed keys: {', '.join(keys)}" if keys else getattr(model, "no_keys_hint", "takes no keys")
        return f"unknown key{' for ' + owner if owner else ''}{did_you_mean(name, keys)}; {shown}"
    if kind == "literal_error":
        options = [str(o) for o in _literal_options(annotation)]
        hint = did_you_mean(value, options) if isinstance(value, str) else ""
        return f"{value!r} is not allowed{hint}; allowed: {', '.join(options)}"
    if kind == "union_tag_invalid":
        tags = [t.strip(" '") for t in str((e.get("ctx") or {}).get("expected_tags", "")).split(",")]
        tag = (e.get("ctx") or {}).get("tag")
        hint = getattr(model, "tag_hint", lambda _: None)(tag)
        if hint:
            return hint
        return f"{tag!r} is not allowed{did_you_mean(str(tag), tags)}; allowed: {', '.join(tags)}"
    if kind == "union_tag_not_found":
        return "is required (the type of this entry)"
    if kind in _RANGES:
        return f"{value!r} is out of range{tail}"
    if kind == "finite_number":
        return f"{value!r} is not a finite number{tail}"
    if kind in _KINDS:
        return f"{value!r} ({type(value).__name__}) is not {_KINDS[kind]}{tail}"
    message = e["msg"]
    return message.removeprefix("Value error, ")


def _literal_options(annotation: Any) -> list[Any]:
    annotation = _strip(annotation)
    if get_origin(annotation) is Literal:
        return list(get_args(annotation))
    for arg in get_args(annotation):
        options = _literal_options(arg)
        if options:
            return options
    return []


def allowed_text(annotation: Any, info: Any = None) -> str:
    """What a field allows, in words: ``expected a number in (0, 1]``, ``allowed: linear, sqrt``, ..."""
    base = _strip(annotation)
    metadata = list(getattr(info, "metadata", []) or [])
    if get_origin(annotation) is Annotated:
        for extra in get_args(annotation)[1:]:  # Field(ge=1) inside Annotated carries its constraints as metadata
            metadata += [extra, *getattr(extra, "metadata", [])]
    options = _literal_options(annotation)
    if options:
        return f"allowed: {', '.join(str(o) for o in options)}"
    if get_origin(base) in (typing.Union, types.UnionType):
        members = [a for a in get_args(base) if a is not type(None)]
        models = [a for a in map(_strip, members) if isinstance(a, type) and issubclass(a, BaseModel)]
        if len(models) > 1:  # a tagged union of blocks (torch's schedulers): the tag's own message says which
            return ""
        texts = [allowed_text(a).removeprefix("expected ") for a in members]
        text = " or ".join(t for t in texts if t)
        if type(None) in get_args(base):
            text = f"{text} or null (none)" if text else "null (none)"
        return f"expected {text}" if text else ""
    for m in metadata:
        if isinstance(m, annotated_types.DocInfo) and "duration" in m.documentation:
            return f"expected {m.documentation}, e.g. {EXAMPLES}"
    if base is bool:
        return "expected true or false"
    if base in (int, float):
        return f"expected {'an integer' if base is int else 'a number'}{_interval(metadata)}"
    if get_origin(base) in (list, tuple):
        args = get_args(base)
        inner = allowed_text(args[0]).removeprefix("expected ") if args else ""
        return f"expected a list{' of ' + _plural(inner) if inner else ''}"
    if base is str:
        return "expected a string"
    if isinstance(base, type) and issubclass(base, BaseModel):  # a nested block: never an empty "expected"
        keys = ", ".join(k for k in base.model_fields if k not in getattr(base, "hidden_keys", ()))
        return f"expected a mapping with the keys {keys}" if keys else "expected a mapping"
    return ""


def _plural(text: str) -> str:
    for a, b in (("a number", "numbers"), ("an integer", "integers"), ("a Composer duration", "Composer durations"),
                 ("a mapping", "mappings")):  # fmt: skip
        if text.startswith(a):
            return b + text[len(a) :]
    return text


def _interval(metadata: list[Any]) -> str:
    lo = hi = None
    lo_open = hi_open = False
    for m in metadata:
        if isinstance(m, annotated_types.Gt):
            lo, lo_open = m.gt, True
        elif isinstance(m, annotated_types.Ge):
            lo, lo_open = m.ge, False
        elif isinstance(m, annotated_types.Lt):
            hi, hi_open = m.lt, True
        elif isinstance(m, annotated_types.Le):
            hi, hi_open = m.le, False
    if lo is not None and hi is not None:
        return f" in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    if lo is not None:
        return f" {'>' if lo_open else '>='} {lo:g}"
    if hi is not None:
        return f" {'<' if hi_open else '<='} {hi:g}"
    return ""
