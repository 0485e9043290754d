"""Check that tests/support/olmo_core_reference.py (OLMo-core's schedulers, transcribed) equals OLMo-core exactly.

OLMo-core (``ai2-olmo-core``) needs torch >= 2.10 and cannot be installed next to this stack, so the tests compare
against a transcription of its code. This script downloads the released wheel (``pip download --no-deps``, nothing is
installed), loads its ``olmo_core/optim/scheduler.py`` with stubs for the package's config plumbing (the LR formulas
import nothing else), and compares every class the tests use with the transcription on random configurations at
every step. Run it after OLMo-core changes its schedulers:

    .venv/bin/python scripts/check_olmo_core_reference.py [VERSION]      # default: the newest release
"""

from __future__ import annotations

import random
import subprocess
import sys
import tempfile
import types
import warnings
import zipfile
from enum import Enum
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def load_released(version: str | None, folder: Path) -> types.ModuleType:
    """The released ``olmo_core.optim.scheduler`` (``version``, or the newest), its imports stubbed."""
    spec = "ai2-olmo-core" + (f"=={version}" if version else "")
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(folder), spec], check=True
    )
    wheel = next(folder.glob("ai2_olmo_core-*.whl"))
    with zipfile.ZipFile(wheel) as z:
        source = z.read("olmo_core/optim/scheduler.py").decode()
        exceptions = z.read("olmo_core/exceptions.py").decode()
    print(f"comparing with {wheel.name}")

    def module(name: str, code: str = "", **attrs: object) -> types.ModuleType:
        m = types.ModuleType(name)
        m.__package__ = name.rpartition(".")[0] if not attrs.get("_package") else name
        m.__dict__.update(attrs)
        sys.modules[name] = m
        if code:
            exec(compile(code, name, "exec"), m.__dict__)
        return m

    class StrEnum(str, Enum):
        def __str__(self) -> str:
            return self.value

    class Registrable:
        @classmethod
        def register(cls, name: str):
            del name
            return lambda c: c

    module("olmo_core", _package=True, __path__=[])

    class Config:
        pass

    module("olmo_core.config", StrEnum=StrEnum, Config=Config, Registrable=Registrable)
    module("olmo_core.exceptions", exceptions)
    module("olmo_core.distributed", _package=True, __path__=[])
    module("olmo_core.distributed.utils", get_rank=lambda: 0)
    module("olmo_core.optim", _package=True, __path__=[])
    module("olmo_core.optim.config", LR_FIELD="lr", INITIAL_LR_FIELD="initial_lr")
    return module("olmo_core.optim.scheduler", source)


def lr(scheduler: object, t: int, t_max: int) -> object:
    """``get_lr(1.0, t, t_max)``, or the name of the error it raises (both sides must raise the same)."""
    try:
        return scheduler.get_lr(1.0, t, t_max)  # type: ignore[attr-defined]
    except (ZeroDivisionError, AssertionError) as e:
        return type(e).__name__


def main() -> None:
    """Compare on 300 random configurations of each class, at every step."""
    sys.path.insert(0, str(REPO))
    import tests.support.olmo_core_reference as ref

    with tempfile.TemporaryDirectory() as tmp:
        real = load_released(sys.argv[1] if len(sys.argv) > 1 else None, Path(tmp))
    warnings.simplefilter("ignore")
    rng = random.Random(0)
    points = 0
    for _ in range(300):
        total = rng.randint(20, 400)
        w, d = rng.randint(1, total // 3), rng.randint(1, total // 3)
        wmin, dmin, b, a = rng.choice([0.0, 0.1, 0.3]), rng.choice([0.0, 0.05]), rng.choice([-0.51, -1.0]), rng.random()
        pairs = [
            (
                real.InvSqrtWithWarmup(alpha_f=a, warmup=w, warmup_min_lr=wmin),
                ref.InvSqrtWithWarmup(alpha_f=a, warmup=w, warmup_min_lr=wmin),
                total,
            ),
            *[
                (
                    cls(warmup=w, decay=d, decay_fraction=None, warmup_min_lr=wmin, decay_min_lr=dmin),
                    twin(warmup=w, decay=d, decay_fraction=None, warmup_min_lr=wmin, decay_min_lr=dmin),
                    total,
                )
                for cls, twin in ((real.WSD, ref.WSD),)
            ],
            (
                real.PowerLR(b=b, warmup=w, decay=d, decay_fraction=None, warmup_min_lr=wmin, decay_min_lr=dmin),
                ref.PowerLR(b=b, warmup=w, decay=d, decay_fraction=None, warmup_min_lr=wmin, decay_min_lr=dmin),
                total,
            ),
        ]
        periods = [rng.randint(20, 100) for _ in range(rng.randint(1, 4))]
        fraction = rng.choice([None, 0.2, 0.25])
        kw = {
            "period_lengths": periods,
            "period_lr_multipliers": [rng.choice([1.0, 0.5, 2.0]) for _ in periods] if rng.random() < 0.5 else None,
            "warmup": rng.randint(0, 10),
            "decay": None if fraction is not None else rng.randint(0, 9),
            "decay_fraction": fraction,
            "decay_min_lr": dmin,
        }
        pairs.append((real.WSDS(**kw), ref.WSDS(**kw), sum(periods) + 5))
        stages_real, stages_ref = [], []
        for _ in range(rng.randint(1, 4)):
            duration, shape = rng.randint(1, 60), rng.choice(["linear", "cosine"])
            end, start = rng.choice([0.0, 0.1, 0.5, 1.0, 1.5]), rng.choice([None, 0.0, 0.3])
            stages_real.append(
                real.ComposableSchedulerStage(
                    duration=duration,
                    shape=real.ComposableSchedulerStageType(shape),
                    start_lr_fraction=start,
                    end_lr_fraction=end,
                )
            )
            stages_ref.append(
                ref.ComposableSchedulerStage(duration, shape, start_lr_fraction=start, end_lr_fraction=end)
            )
        override_real = override_ref = None
        if rng.random() < 0.6:
            start, duration = rng.randint(0, 150), rng.randint(1, 50)
            shape, end = rng.choice(["linear", "cosine"]), rng.choice([0.0, 0.05])
            override_real = real.OverrideDecay(
                start=start, duration=duration, shape=real.ComposableSchedulerStageType(shape), end_lr_fraction=end
            )
            override_ref = ref.OverrideDecay(start, duration, shape, end_lr_fraction=end)
        pairs.append(
            (
                real.ComposableScheduler(stages=stages_real, override_decay=override_real),
                ref.ComposableScheduler(stages=stages_ref, override_decay=override_ref),
                300,
            )
        )
        for theirs, ours, t_max in pairs:
            for t in range(t_max + 1):
                a_, b_ = lr(theirs, t, t_max), lr(ours, t, t_max)
                assert a_ == b_, f"{type(theirs).__name__} at {t}: released {a_!r}, transcribed {b_!r}"
                points += 1
    print(f"OK: the transcription equals the released module bit for bit at {points} points")


if __name__ == "__main__":
    main()
