"""What every schedule model shares: its ``scheduler.name``, the checks that need the run, and its multiplier.

A schedule model is a :class:`~foundry_ext.config.base.ConfigModel` whose fields are the YAML keys of one
``scheduler.name``. Schedules of this package also carry their formula (:meth:`ScheduleModel.multiplier`), a pure
function of the time and the resolved durations, so that the Composer adapter (``foundry_ext.trainer``), the
preview (``foundry-ext plot``) and the docs run the same code. Models of Composer's and llm-foundry's own schedules
only validate (their formula is Composer's, run by Composer's class).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from foundry_ext.config.base import ConfigModel
from foundry_ext.config.durations import Duration, Resolved, convert, resolve
from foundry_ext.config.errors import ConfigError, Problem, join_path

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np

__all__ = ["Mark", "RunCheck", "RunContext", "ScheduleModel", "describe_keys", "elementwise", "run_check"]

#: A named point of a schedule: (label, time, unit), e.g. ("warmup end", 100, "ba").
Mark = tuple[str, int, str]


#: ``scheduler.name`` -> model, filled as each model class is defined.
_DEFINED: dict[str, type[ScheduleModel]] = {}


class ScheduleModel(ConfigModel):
    """A scheduler's config; subclasses declare the fields and set the class variables."""

    #: ``scheduler.name`` in YAML.
    name: ClassVar[str] = ""
    #: One line for ``foundry-ext schedulers`` and the docs.
    summary: ClassVar[str] = ""
    #: ``module:Class`` of the ComposerScheduler that runs it (imported only when training or plotting).
    adapter: ClassVar[str] = ""
    #: Who registers the name: ``foundry-ext`` (an entry point of this package) or ``llm-foundry`` (built in).
    provider: ClassVar[str] = "foundry-ext"
    #: The warmup field, if the schedule has one: a warmup longer than the run is reported.
    warmup_field: ClassVar[str | None] = None
    #: Whether :meth:`multiplier` is this package's (else the adapter runs Composer's or llm-foundry's class).
    has_formula: ClassVar[bool] = False
    #: What kind of schedule it is, for the tools that show it: ``formula`` (:meth:`multiplier` alone), ``torch`` (a
    #: torch scheduler, stepped), ``plateau`` (a time part times a scale decided at run time). Only read when
    #: :attr:`has_formula`; the others run Composer's or llm-foundry's class.
    kind: ClassVar[Literal["formula", "torch", "plateau"]] = "formula"
    #: Whether every duration must convert to one unit (this package's formulas); Composer's classes convert each
    #: duration on its own, so a warmup in tokens with milestones in batches is valid there.
    single_unit: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("name")
        if isinstance(name, str) and name:
            _DEFINED.setdefault(name, cls)

    @staticmethod
    def defined(name: str) -> type[ScheduleModel] | None:
        """The model of ``scheduler.name`` among the models defined so far (the catalog imports every one).

        For a schedule that holds another one (the plateau's ``base``): the catalog is above this layer, so a
        model looks its neighbours up here rather than importing it.
        """
        return _DEFINED.get(name)

    def unscaled(self) -> frozenset[str]:
        """Durations that ssr does not scale: the warmup unless ``scale_warmup`` is true (Composer's rule)."""
        if self.warmup_field and not getattr(self, "scale_warmup", True):
            return frozenset({self.warmup_field})
        return frozenset()

    def run_problems(self, d: Mapping[str, int], run: RunContext) -> list[Problem]:
        """Errors that need the run, given the durations resolved for it (``d``); fields are relative to the block."""
        del d, run
        return []

    def run_warnings(self, d: Mapping[str, int], run: RunContext) -> list[Problem]:
        """Valid but suspicious settings that need the run (e.g. a schedule that ends before it); fields relative."""
        del d, run
        return []

    def marks(self, d: Mapping[str, int], units: Mapping[str, str], total: int) -> list[Mark]:
        """Named points of the schedule (warmup end, milestones, restarts, ...) as resolved times, for plots.

        Args:
            d: the durations resolved for the run.
            units: the unit of each of ``d``.
            total: the run length in the unit of ``max_duration`` (batches unless tokens or samples).
        """
        del total
        marks: list[Mark] = []
        if self.warmup_field and d.get(self.warmup_field, 0) > 0:
            marks.append(("warmup end", d[self.warmup_field], units[self.warmup_field]))
        for i, value in enumerate(getattr(self, "milestones", None) or []):
            if isinstance(value, Duration):
                marks.append((f"milestone {i + 1}", d[f"milestones[{i}]"], units[f"milestones[{i}]"]))
        return marks

    def multiplier(self, t: int, d: Mapping[str, int]) -> float:
        """The LR multiplier at time ``t`` (in the resolved unit), given the resolved durations ``d``."""
        raise NotImplementedError(f"{self.name}: its formula is Composer's; build the scheduler to evaluate it")

    def multipliers(self, t: np.ndarray, d: Mapping[str, int]) -> np.ndarray:
        """:meth:`multiplier` at every time of ``t`` (int64, in the resolved unit), as float64, bitwise equal to it.

        This default calls :meth:`multiplier` per element; schedules override it with the same formula on whole
        arrays (numpy's ``+ - * /`` and ``sqrt`` round as Python's float operations do; ``cos`` and ``**`` go
        through :func:`elementwise` so that the C library computes them as for a Python float).
        """
        return elementwise(lambda x: self.multiplier(x, d), t)


def elementwise(func: Callable[[Any], float], x: np.ndarray) -> np.ndarray:
    """``func`` of each element of ``x`` (as a Python number), as a float64 array: ``math.cos`` exactly as Python."""
    import numpy as np

    return np.fromiter(map(func, x.tolist()), dtype=np.float64, count=len(x))


@dataclass(frozen=True)
class RunContext:
    """What the run-dependent checks know: the unit the durations were resolved to, and the run."""

    unit: str
    max_duration: Duration
    dataloader_len: int | None
    total: int  # max_duration converted: in ``total_unit`` (batches unless the run is measured in tokens or samples)
    total_unit: str
    ssr: float = 1.0


@dataclass
class RunCheck:
    """The result of :func:`run_check`: the resolved durations, and what is wrong (errors) or suspicious (warnings)."""

    resolved: Resolved | None
    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    units: dict[str, str] = field(default_factory=dict)  # the unit of each resolved duration
    total: int = 0  # max_duration in ``total_unit``
    total_unit: str = "ba"


def run_check(
    model: ScheduleModel, max_duration: Duration, dataloader_len: int | None, ssr: float = 1.0, path: str = "scheduler"
) -> RunCheck:
    """Resolve ``model``'s durations for a run and check what needs the run length.

    Errors: units that cannot be converted into each other (for this package's formulas), and the model's own
    :meth:`~ScheduleModel.run_problems` (e.g. a WSD warmup and decay that overlap). Warnings: the model's own
    :meth:`~ScheduleModel.run_warnings`, and a warmup longer than the run (the LR never reaches its peak). Both name
    the YAML field: ``scheduler.t_warmup: ...``.

    Raises:
        UnknownBatchesPerEpoch: a duration needs the batches per epoch and ``dataloader_len`` is None.
    """
    durations = model.durations()
    unscaled = model.unscaled()
    total = convert(Duration(1.0, "dur"), max_duration, dataloader_len)
    if model.single_unit:
        try:
            resolved = resolve(durations, max_duration, dataloader_len, ssr, unscaled, path)
        except ConfigError as e:
            return RunCheck(None, errors=e.problems)
        units = {name: resolved.unit for name in durations}
    else:  # each duration converted on its own, as Composer's classes do
        converted = {
            n: convert(t, max_duration, dataloader_len, 1.0 if n in unscaled else ssr) for n, t in durations.items()
        }
        units = {n: t.unit for n, t in converted.items()}
        common = set(units.values())
        resolved = Resolved(
            common.pop() if len(common) == 1 else total.unit, {n: int(t.value) for n, t in converted.items()}
        )
    run = RunContext(resolved.unit, max_duration, dataloader_len, int(total.value), total.unit, ssr)
    check = RunCheck(resolved, units=units, total=int(total.value), total_unit=total.unit)
    check.errors = [
        Problem(join_path(path, [p.field] if p.field else []), p.message)
        for p in model.run_problems(resolved.values, run)
    ]
    check.warnings = [
        Problem(join_path(path, [p.field] if p.field else []), p.message)
        for p in (model.run_warnings(resolved.values, run) if not check.errors else [])
    ]
    if not check.errors:
        check.warnings += _ends_before_run(model, resolved.values, run, path)
    warmup = model.warmup_field
    if warmup and warmup in resolved.values and units[warmup] == total.unit and resolved.values[warmup] > total.value:
        unit = _unit_name(total.unit)
        check.warnings.append(
            Problem(
                join_path(path, [warmup]),
                f"the warmup ({getattr(model, warmup)} = {resolved.values[warmup]} {unit}) is longer than the run "
                f"(max_duration={max_duration} = {int(total.value)} {unit}): the LR never reaches its peak; shorten "
                f"{warmup} or raise max_duration",
            )
        )
    return check


def _ends_before_run(model: ScheduleModel, d: Mapping[str, int], run: RunContext, path: str) -> list[Problem]:
    """This package's formulas that end at ``t_max`` and hold ``alpha_f`` after it (warmup_stable_decay, power).

    Valid (a run may train on at its floor), but usually a ``t_max`` left from a longer run: ``stages`` and
    ``wsd_periods`` warn of the same in their own words. Composer's classes (``linear``, ``cosine``, ...) are left
    alone: their own tests build a ``t_max`` shorter than the run on purpose.
    """
    fields = type(model).model_fields
    if not (model.has_formula and "t_max" in fields and "alpha_f" in fields) or run.unit != run.total_unit:
        return []
    end = d.get("t_max", run.total)
    if end >= run.total:
        return []
    unit = _unit_name(run.unit)
    return [
        Problem(
            join_path(path, ["t_max"]),
            f"{model.t_max} ({end} {unit}) ends before max_duration={run.max_duration} ({run.total} "
            f"{unit}): the last {run.total - end} {unit} train at alpha_f ({model.alpha_f:g}); set "
            "t_max: 1dur, or shorten the run",
        )
    ]


def _unit_name(unit: str) -> str:
    return {"ba": "batches", "tok": "tokens", "sp": "samples"}.get(unit, unit)


def describe_keys(model: type[ScheduleModel]) -> list[dict[str, Any]]:
    """One row per key of ``model``: name, type, default, what is allowed, description (docs tables, listings)."""
    from foundry_ext.config.problems import allowed_text

    rows = []
    for name, info in model.model_fields.items():
        required = info.is_required()
        default = None if required else info.get_default(call_default_factory=True)
        rows.append(
            {
                "key": name,
                "required": required,
                "default": str(default) if isinstance(default, Duration) else default,
                "allowed": (info.json_schema_extra or {}).get("x-allowed")  # type: ignore[union-attr]
                or allowed_text(info.annotation, info).removeprefix("expected ").removeprefix("allowed: "),
                "description": info.description or "",
            }
        )
    return rows
