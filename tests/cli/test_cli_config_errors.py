"""A config's problem reads the same from every command that takes a train YAML (issue 45).

One mapping turns a ``ConfigError`` into the command's error line (``UsageError.of_config``): the same bad config
gives ``plot``, ``validate``, ``lr-find``, ``anneal`` and ``law`` the same line, ``<yaml.field>: <problem>; <what is
allowed>``, problems joined by ``; `` on the one line (``validate`` lists the pipeline's problems a line each, as its
report). A scheduler name no registry holds is worded once (``config.errors.not_a_scheduler``), and every quoted
text is escaped by one function (``foundry_ext.text.one_line``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from foundry_ext.cli import main
from foundry_ext.config.train_yaml import read_train_yaml
from foundry_ext.text import one_line
from tests.law.paper import CURVES, TRAIN

ROOT = Path(__file__).resolve().parents[2]
TINY_WSD = (ROOT / "yamls/tiny-wsd.yaml").read_text()

# each command that reads a train YAML, as a user types it; {config}, {tmp} and {law} are filled in per test
COMMANDS = {
    "plot": ["plot", "{config}", "--out", "{tmp}/lr.png"],
    "validate": ["validate", "{config}"],
    "lr-find": ["lr-find", "{config}"],
    "anneal": ["anneal", "{tmp}/no-checkpoint.pt", "{config}", "--decay", "2ba", "--out", "{tmp}/branch.yaml"],
    "law": ["law", "predict", "{law}", "{config}"],
}

# a config the loader refuses -> the one problem line every command prints
LOAD_PROBLEMS = {
    "code-paths-not-a-list": (
        TINY_WSD + "code_paths: 5\n",
        "code_paths: 5 is not a list of Python files; expected e.g. code_paths: [my_scheduler.py]",
    ),
    "missing-file": (None, "{config}: no such file"),
    "unresolved-variable": (
        TINY_WSD + "extra: ${variables.nope}\n",
        None,  # OmegaConf's wording: the same from each command is what is asserted
    ),
}


@pytest.fixture(scope="module")
def law(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("law") / "law.json"
    assert main(["law", "fit", *(str(CURVES / f"{n}.csv") for n in TRAIN), "--out", str(path)]) == 0
    return path


def error_lines(
    command: str, args: list[str], capsys: pytest.CaptureFixture[str], **fill: str
) -> tuple[int, list[str], str]:
    """Run ``foundry-ext`` in this process; its status, its ``error:`` lines (prefix cut) and its whole stderr."""
    capsys.readouterr()
    rc = main([a.format(**fill) for a in args])
    err = capsys.readouterr().err
    prefix = f"foundry-ext {command.split()[0]}: error: "
    return rc, [line.removeprefix(prefix) for line in err.splitlines() if line.startswith(prefix)], err


@pytest.mark.parametrize("case", list(LOAD_PROBLEMS))
def test_one_bad_config_is_the_same_line_from_every_command(
    case: str, law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = LOAD_PROBLEMS[case]
    config = tmp_path / "bad.yaml"
    if text is not None:
        config.write_text(text)
    fill = {"config": str(config), "tmp": str(tmp_path), "law": str(law)}
    said = {}
    for command, args in COMMANDS.items():
        rc, lines, err = error_lines(command, args, capsys, **fill)
        assert rc == 2 and len(lines) == 1 and "Traceback" not in err, (command, err)
        said[command] = lines[0]
    first = said["plot"]
    if expected is not None:
        assert first == expected.format(**fill)
    assert said == dict.fromkeys(COMMANDS, first)
    assert not (tmp_path / "lr.png").exists() and not (tmp_path / "branch.yaml").exists()


def test_several_problems_are_one_line_in_validates_order(
    law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two bad scheduler keys: ``plot`` and ``law`` print validate's two lines as one line, joined by ``; ``."""
    config = tmp_path / "cfg.yaml"
    config.write_text(TINY_WSD)
    bad = ["scheduler.alpha_f=2", "scheduler.t_warmup=soon"]
    capsys.readouterr()
    assert main(["validate", str(config), *bad]) == 2
    report = [line.removeprefix(f"{config}: ") for line in capsys.readouterr().err.splitlines()]
    problems = [line for line in report if line.startswith("scheduler.")]
    assert [p.split(":")[0] for p in problems] == ["scheduler.t_warmup", "scheduler.alpha_f"], report
    fill = {"config": str(config), "tmp": str(tmp_path), "law": str(law)}
    for command in ("plot", "law"):
        rc, lines, err = error_lines(command, [*COMMANDS[command], *bad], capsys, **fill)
        assert rc == 2 and lines == ["; ".join(problems)], (command, err)


def test_a_misspelt_scheduler_is_worded_once(law: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "cfg.yaml"
    config.write_text(TINY_WSD)
    typo = "scheduler.name=warmup_stabel_decay"
    expected = (
        "scheduler.name: 'warmup_stabel_decay' is not a registered scheduler (did you mean 'warmup_stable_decay'?); "
        "`foundry-ext schedulers` lists all"
    )
    fill = {"config": str(config), "tmp": str(tmp_path), "law": str(law)}
    for command in ("plot", "law"):
        rc, lines, err = error_lines(command, [*COMMANDS[command], typo], capsys, **fill)
        assert rc == 2 and lines == [expected], (command, err)
    capsys.readouterr()
    assert main(["validate", str(config), typo]) == 2
    assert f"{config}: {expected}" in capsys.readouterr().err.splitlines()
    # the schedulers command looks among this package's callbacks too, and lists both
    rc, lines, err = error_lines("schedulers", ["schedulers", "warmup_stabel_decay"], capsys)
    assert rc == 2 and len(lines) == 1, err
    assert (
        lines[0].startswith(
            "'warmup_stabel_decay' is not a registered scheduler (did you mean 'warmup_stable_decay'?) nor one of this "
            "package's callbacks; schedulers: "
        )
        and "; callbacks: batch_size_schedule, checkpoint_guard, " in lines[0]
    ), lines[0]


def test_a_base_scheduler_no_registry_holds_is_worded_the_same(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The plateau's base, checked before the run (validate) and named the same way."""
    config = tmp_path / "cfg.yaml"
    config.write_text((ROOT / "yamls/tiny-plateau.yaml").read_text())
    cfg = read_train_yaml(str(config))
    assert cfg.scheduler.name == "reduce_lr_on_plateau"
    capsys.readouterr()
    rc = main(["validate", str(config), "scheduler.base.name=cosine_warmup"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert (
        f"{config}: scheduler.base.name: 'cosine_warmup' is not a registered scheduler (did you mean "
        "'cosine_with_warmup'?); `foundry-ext schedulers` lists all"
    ) in err.splitlines(), err


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text, kept", "plain text, kept"),
        ("two\nlines\r", r"two\nlines\r"),
        ("nul\x00 and \u2028", r"nul\x00 and \u2028"),
        ("not utf-8: \udce9", r"not utf-8: \udce9"),
        (Path("a\tb"), r"a\tb"),
    ],
)
def test_one_line_escapes_what_would_break_the_line(text: str | Path, shown: str) -> None:
    assert one_line(text) == shown


def test_a_value_with_a_newline_stays_on_the_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A config path holding a newline: every command's one error line shows it escaped."""
    folder = tmp_path / "a\nb"
    folder.mkdir()
    config = folder / "missing.yaml"
    for command in ("plot", "validate", "lr-find"):
        rc, lines, err = error_lines(command, COMMANDS[command], capsys, config=str(config), tmp=str(tmp_path), law="")
        assert rc == 2 and err.count("\n") == 1, err
        assert lines == [f"{one_line(str(config))}: no such file"], err
