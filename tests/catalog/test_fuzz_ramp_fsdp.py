"""Fuzzing ``validate`` and ``plot`` on this round's new keys (issue 46, part 5): the batch-size ramp, ``fsdp_config``.

Each example starts from a shipped YAML and mutates one block hostilely, mostly near-valid:

* ``batch_size_schedule`` (``yamls/tiny-batch-ramp.yaml``): stage lists of odd types and lengths, ``at`` strings in
  every unit and garbage, huge, negative, float, bool and text batches, unicode, ``lr_scaling`` values, unknown keys,
  the block at the top level, under ``callbacks`` or both, a key given twice in the YAML text, override lines;
* ``fsdp_config`` (``yamls/tiny-fsdp.yaml``): FSDP1 and FSDP2 keys with values of every type, enum strings misspelt
  or recased, unknown keys, nesting, the block replaced by a scalar or a list; ``FSDP_VERSION`` 1 or 2 and
  ``validate --world-size`` 1 to 3.

The promise (tests/catalog/fuzzing.py): exit 0 or 2, no traceback or exception name, within the bounds, and no
silent acceptance: what ``validate`` accepts is a block llm-foundry and Composer read as written (``_accepted_ramp``,
``_accepted_fsdp``). What validates is plotted. Stages: ``not parsed``, ``refused``, ``valid``, ``plotted``,
``plot refused``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from foundry_ext.catalog.fsdp import BOOL_KEYS, FSDP1_KEYS, FSDP2_KEYS
from tests.catalog.fuzzing import check_promise, long_timeout, profile, report, stage, time_is_up
from tests.support.launcher import REPO

RAMP, FSDP = "batch_size_schedule", "fsdp_config"
RAMP_YAML = REPO / "yamls" / "tiny-batch-ramp.yaml"
FSDP_YAML = REPO / "yamls" / "tiny-fsdp.yaml"
BASE = {RAMP: yaml.safe_load(RAMP_YAML.read_text()), FSDP: yaml.safe_load(FSDP_YAML.read_text())}

ODD = st.sampled_from(
    [None, True, False, 0, -1, 1, 2**63, 10**40, 0.5, 1e308, math.inf, -math.inf, math.nan, "", " ", "☃", "\u202e",
     "\x00", "${x}", "${oc.env:HOME}", [], {}, [1, 2], {"k": {"k": {"k": 1}}}, "a\nb: 1"]
)  # fmt: skip
NUMBER = st.one_of(
    st.integers(-5, 10**6).map(str),
    st.sampled_from(["0", "0.5", "1.5", "1e3", "1e400", "nan", "inf", "-0", "4096.0", "1_024", "١٠", "", " 8",
                     "0x10", "9" * 30, ".1", "4096", "12288", "32", "96"]),
)  # fmt: skip
UNIT = st.sampled_from(["tok", "tok", "sp", "sp", "ba", "ep", "dur", "", "TOK", " tok", "tokens", "sec", "iter", "%"])
AT = st.one_of(
    st.builds(lambda n, u: f"{n}{u}", NUMBER, UNIT),
    st.sampled_from(["4096tok", "8192tok", "12288tok", "64sp", "96sp", "160sp"]),
    ODD,
    st.text(max_size=6),
)
BATCH = st.one_of(
    st.sampled_from([16, 16, 32, 32, 24, 64, 256, 8, 12, 0, -8, 2**63, 10**40, 16.0, 16.5, True, "16", "sixteen"]),
    st.integers(-(2**64), 2**64),
    ODD,
)
LR_SCALING = st.sampled_from(["none", "sqrt", "linear", "SQRT", "Sqrt", "cube", "", " sqrt", None, 1, True, "☃", []])


@st.composite
def stages(draw: st.DrawFn) -> Any:
    if draw(st.integers(0, 9)) == 0:  # the list itself replaced
        return draw(ODD)
    items = []
    hostile = draw(st.integers(0, 2))  # how many values come from the hostile pools (mostly few: near-valid)
    for i in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["stage"] * 6 + ["missing", "extra", "odd"]))
        near_at = draw(st.sampled_from([f"{4096 * (i + 1)}tok", f"{32 * (i + 1)}sp", f"{1000 * (i + 1)}tok"]))
        near_batch = draw(st.sampled_from([16 * (i + 1), 8 * (i + 2), 32]))
        item: Any = {
            "at": draw(AT) if hostile and draw(st.booleans()) else near_at,
            "global_train_batch_size": draw(BATCH) if hostile and draw(st.booleans()) else near_batch,
        }
        if kind == "missing":
            del item[draw(st.sampled_from(["at", "global_train_batch_size"]))]
        elif kind == "extra":
            item[draw(st.sampled_from(["lr", "batch", "At", "☃", "global_train_batch_size "]))] = draw(BATCH)
        elif kind == "odd":
            item = draw(ODD)
        items.append(item)
    return items


@st.composite
def ramp_configs(draw: st.DrawFn) -> tuple[str, list[str]]:
    """A train YAML's text (a key may be given twice) and override lines."""
    cfg = json.loads(json.dumps(BASE[RAMP]))
    block: Any = {"stages": draw(stages())}
    if draw(st.booleans()):
        block["lr_scaling"] = draw(LR_SCALING)
    if draw(st.integers(0, 5)) == 0:
        block[draw(st.sampled_from(["lr_scale", "stage", "☃", "warmup"]))] = draw(ODD)
    if draw(st.integers(0, 9)) == 0:
        block = draw(ODD)
    del cfg[RAMP]
    where = draw(st.sampled_from(["top", "top", "top", "callbacks", "both"]))
    if where in ("top", "both"):
        cfg[RAMP] = block
    if where in ("callbacks", "both"):
        cfg["callbacks"] = {**cfg["callbacks"], RAMP: block}
    if draw(st.integers(0, 4)) == 0:
        cfg["global_train_batch_size"] = draw(BATCH)
    if draw(st.integers(0, 5)) == 0:
        cfg["train_loader"]["name"] = draw(st.sampled_from(["finetuning", "text_batch_ramp", "", "TEXT"]))
    text = _dump(cfg)
    twice = draw(st.sampled_from([None, None, None, None, "top", "stage", "lr_scaling"]))
    if twice == "top":  # the whole block given twice: YAML keeps the last one, llm-foundry's train.py refuses
        text += f"{RAMP}: {_flow(block)}\n"
    elif twice == "stage" and isinstance(block, dict):
        text += f"{RAMP}: {{stages: [{{at: 64sp, at: 96sp, global_train_batch_size: 16}}]}}\n"
    elif twice == "lr_scaling":
        text += f"{RAMP}: {{stages: [{{at: 64sp, global_train_batch_size: 16}}], lr_scaling: sqrt, lr_scaling: none}}\n"
    overrides = draw(
        st.lists(
            st.builds(
                lambda k, v: f"{k}={v}",
                st.sampled_from([f"{RAMP}.lr_scaling", "global_train_batch_size", "max_duration", f"{RAMP}.stages",
                                 f"{RAMP}", "max_seq_len", f"{RAMP}.x"]),
                st.one_of(NUMBER, AT.map(str), st.sampled_from(["sqrt", "[]", "{}", "null", "[{at: 64sp}]", "64ba"])),
            ),
            max_size=2,
        )
    )  # fmt: skip
    return text, overrides


FSDP_VALUES = st.sampled_from(
    ["FULL_SHARD", "full_shard", "FULL_SHRAD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD", "sharded", "SHARDED",
     "shraded", "full", "local", "DEFAULT", "PURE", "FULL", "pure", "bf16", "BACKWARD_PRE", "BACKWARD_POST", "NONE",
     "ep{epoch}-ba{batch}", "../x", "true", "yes", 0, 1, 2, -1, 2.5, {"param_dtype": "bf16"}]
)  # fmt: skip
NEAR_FSDP = {
    "state_dict_type": ["sharded", "full", "sharded"],
    "mixed_precision": ["FULL", "DEFAULT", "PURE", "full", {"param_dtype": "fp32"}],
    "reshard_after_forward": [True, False, 2],
}
FSDP_KEYS = st.one_of(
    st.sampled_from(FSDP2_KEYS),  # half the keys FSDP2 takes: their values are what is left to check
    st.sampled_from(sorted({*FSDP1_KEYS, "shardng_strategy", "☃", "", "fsdp"})),
)


@st.composite
def fsdp_configs(draw: st.DrawFn) -> tuple[str, list[str], dict[str, str], int]:
    """A train YAML's text, override lines, the environment (``FSDP_VERSION``), ``--world-size``."""
    cfg = json.loads(json.dumps(BASE[FSDP]))
    block: Any = dict(cfg[FSDP])
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["near", "near", "set", "set", "drop", "nest"]))
        if kind == "drop" and block:
            del block[draw(st.sampled_from(sorted(block)))]
        elif kind == "nest":
            block[draw(FSDP_KEYS)] = {"k": {"k": draw(FSDP_VALUES)}}
        elif kind == "near":  # a key FSDP2 takes, with a value of its kind
            key = draw(st.sampled_from([k for k in FSDP2_KEYS if k != "device_mesh"]))  # Composer builds the mesh
            block[key] = draw(st.sampled_from(NEAR_FSDP.get(key, [True, False])))
        else:
            block[draw(FSDP_KEYS)] = draw(st.one_of(FSDP_VALUES, ODD))
    if draw(st.integers(0, 9)) == 0:
        block = draw(ODD)
    cfg[FSDP] = block
    text = _dump(cfg)
    if draw(st.integers(0, 9)) == 0:
        text += f"{FSDP}: {{state_dict_type: sharded, state_dict_type: full}}\n"
    overrides = draw(
        st.lists(
            st.builds(lambda k, v: f"{FSDP}.{k}={v}", FSDP_KEYS, FSDP_VALUES.map(str)).filter(lambda o: "{" not in o),
            max_size=2,
        )
    )
    version = draw(st.sampled_from(["2", "2", "1", ""]))
    return text, overrides, {"FSDP_VERSION": version}, draw(st.sampled_from([2, 2, 1, 3]))


def _dump(cfg: Any) -> str:
    return yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True)


def _flow(value: Any) -> str:
    return (
        yaml.safe_dump(value, default_flow_style=True, width=math.inf, allow_unicode=True)
        .strip()
        .removesuffix("...")
        .strip()
    )


def _loaded(path: Path) -> Any:
    """The YAML as llm-foundry's ``train.py`` reads it (a key given twice: refused there, so ``None`` here)."""
    from omegaconf import OmegaConf

    try:
        return OmegaConf.to_container(OmegaConf.load(path))
    except Exception:  # any YAML OmegaConf refuses (a key given twice, ...), validate must refuse too
        return None


def _accepted_ramp(path: Path) -> None:
    """What ``validate`` accepted is a ramp as written: stages of whole batches at points in tok or sp."""
    cfg = _loaded(path)
    assert cfg is not None, "validate accepted a YAML OmegaConf refuses"
    blocks = [b for b in (cfg.get(RAMP), (cfg.get("callbacks") or {}).get(RAMP)) if b is not None]
    assert len(blocks) <= 1, "the ramp given twice was accepted"
    for block in blocks:
        assert set(block) <= {"stages", "lr_scaling"}, block
        assert block.get("lr_scaling", "none") in ("none", "sqrt", "linear"), block
        for s in block["stages"]:
            size = s["global_train_batch_size"]
            assert type(size) is int and size >= 1, s
            at = str(s["at"]).strip().lower()  # the duration parser takes '4096 TOK' as tokens
            assert at.endswith(("tok", "sp")), s
            number = float(at.removesuffix("tok").removesuffix("sp"))
            assert number == int(number), f"a fractional point accepted: {s}"


def _accepted_fsdp(path: Path, version: str) -> None:
    """What ``validate`` accepted is an ``fsdp_config`` Composer uses as written (keys, enum values, types)."""
    cfg = _loaded(path)
    assert cfg is not None, "validate accepted a YAML OmegaConf refuses"
    block = cfg.get(FSDP)
    if block is None:
        return
    assert isinstance(block, dict), f"{FSDP}: {block!r} accepted"
    keys = FSDP2_KEYS if version == "2" else FSDP1_KEYS
    for key, value in block.items():
        assert key in keys, f"{FSDP}.{key} accepted under FSDP_VERSION={version}"
        if key == "state_dict_type":
            assert value in ("full", "sharded"), f"{FSDP}.{key}: {value!r} accepted"
        if key in BOOL_KEYS:  # Composer tests the value's truth: "false" would switch it on
            assert isinstance(value, bool), f"{FSDP}.{key}: {value!r} accepted"
        if key in ("sharding_strategy", "backward_prefetch") or (
            key == "mixed_precision" and not isinstance(value, dict)
        ):
            assert isinstance(value, str), f"{FSDP}.{key}: {value!r} accepted"


def _validate_then_plot(
    fuzzer: str, config: Path, overrides: list[str], tmp: Path, env: dict[str, str], world: int
) -> bool:
    """The promise for ``validate`` then, when it says OK, ``plot``; whether ``validate`` said OK."""
    rc, _ = check_promise(["validate", str(config), *overrides, "--world-size", str(world)], env=env, one_line=False)
    if rc == 2:
        stage(fuzzer, "refused")
        return False
    stage(fuzzer, "valid")
    out = tmp / "lr.png"
    rc, _ = check_promise(["plot", str(config), *overrides, "--out", str(out), "--points", "50"], env=env)
    stage(fuzzer, "plotted" if rc == 0 else "plot refused")
    assert (rc == 0) == out.exists(), f"plot: status {rc}, {out} {'written' if out.exists() else 'missing'}"
    return True


@pytest.fixture(scope="module")
def warm(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The first ``plot`` imports matplotlib and torch: once, not timed as an input's cost."""
    here = os.getcwd()
    os.chdir(REPO)
    try:
        out = tmp_path_factory.mktemp("warm") / "lr.png"
        for path in (RAMP_YAML, FSDP_YAML):
            check_promise(["plot", str(path), "--out", str(out), "--points", "50"])
    finally:
        os.chdir(here)


def _in_repo(fn: Any) -> Any:
    here = os.getcwd()
    os.chdir(REPO)  # the tiny examples read ./demo-data's index
    try:
        return fn()
    finally:
        os.chdir(here)


@long_timeout
@profile(10)
@given(example=ramp_configs())
def test_batch_size_schedule_keeps_the_promise(
    example: tuple[str, list[str]], tmp_path_factory: pytest.TempPathFactory, warm: None
) -> None:
    time_is_up(RAMP, 2)
    text, overrides = example
    tmp = tmp_path_factory.mktemp("ramp")
    config = tmp / "ramp.yaml"
    config.write_text(text, encoding="utf-8")
    if _in_repo(lambda: _validate_then_plot(RAMP, config, overrides, tmp, {}, 1)) and not overrides:
        _accepted_ramp(config)


@long_timeout
@profile(10)
@given(example=fsdp_configs())
def test_fsdp_config_keeps_the_promise(
    example: tuple[str, list[str], dict[str, str], int], tmp_path_factory: pytest.TempPathFactory, warm: None
) -> None:
    time_is_up(FSDP, 2)
    text, overrides, env, world = example
    tmp = tmp_path_factory.mktemp("fsdp")
    config = tmp / "fsdp.yaml"
    config.write_text(text, encoding="utf-8")
    if _in_repo(lambda: _validate_then_plot(FSDP, config, overrides, tmp, env, world)) and not overrides:
        _accepted_fsdp(config, env["FSDP_VERSION"] or "1")


# What the fuzzer found (each a regular test, fixed): case -> (overrides of tiny-batch-ramp.yaml, fragments of plot's
# line; validate: exit 2, within the bounds)
FOUND = {
    # a ramp's preview listed every step: max_duration=2**53 tokens took minutes of CPU and > 5 GB in validate and
    # plot (now counted first, BatchPlan.step_count, and refused above MAX_PREVIEW_STEPS)
    "ramp-max_duration-2**53tok": (
        ["max_duration=9007199254740992tok"],
        ("max_duration: '9007199254740992tok' is 2,199,023,255,557 steps", "at most 500,000"),
    ),
    # validate said OK to a batch of 2**63 samples (no ramp left: batch_size_schedule= unsets it), then plot's clock
    # overflowed numpy's int64: 'scheduler (warmup_stable_decay): OverflowError: Python int too large ...'
    "global_train_batch_size-2**63": (
        ["batch_size_schedule=", "global_train_batch_size=9223372036854775808"],
        ("global_train_batch_size: 9223372036854775808 samples of 128 tokens", "expected at most 2**53"),
    ),
}


@pytest.mark.parametrize("case", sorted(FOUND))
@pytest.mark.parametrize("command", ["validate", "plot"])
def test_what_the_fuzzer_found(case: str, command: str, tmp_path: Path) -> None:
    overrides, expected = FOUND[case]
    out = tmp_path / "lr.png"
    argv = [command, str(RAMP_YAML), *overrides, *(["--out", str(out)] if command == "plot" else [])]
    rc, line = _in_repo(lambda: check_promise(argv, one_line=command == "plot"))  # within 10 CPU s and 2 GB
    assert rc == 2 and not out.exists()
    if command == "plot":
        assert all(fragment in line for fragment in expected), line


def test_the_bool_keys_are_composers() -> None:
    """``BOOL_KEYS`` (refused unless true or false) are the ``bool`` fields of Composer's FSDPConfig and FSDP2Config."""
    from dataclasses import fields

    from composer.utils.parallelism import FSDP2Config, FSDPConfig

    typed = {f.name for c in (FSDPConfig, FSDP2Config) for f in fields(c) if f.type in (bool, "bool")}
    assert set(BOOL_KEYS) == {name.lstrip("_") for name in typed}


def test_zz_report_the_stages() -> None:
    """The long profile's counts (a JSON file); in the suite, that inputs get both refused and plotted."""
    report((RAMP, FSDP), {RAMP: [("refused",), ("plotted",)], FSDP: [("refused",), ("plotted",)]})
