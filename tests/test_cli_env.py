"""Environment forms of flags (despina.cli_env) on a parser of its own: derived names, the command line winning,
values parsed and checked as the flag's, switches, and refusals that name the variable."""

from __future__ import annotations

import argparse

import pytest

from despina import cli_env


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="tool", exit_on_error=True)
    p.add_argument("--worker-count", type=int, default=4, help="workers")
    p.add_argument("--mode", default="fast", choices=("fast", "slow"), help="mode")
    p.add_argument("--name", help="a name")
    p.add_argument("--verbose", action="store_true", help="talk")
    p.add_argument("--no-color", dest="color", action="store_false", help="plain")
    p.add_argument("--secret-knob", type=int, default=0, help=argparse.SUPPRESS)
    cli_env.bind(p, {"--name": "TOOL_NAME"})
    return p


def test_names_derive_from_the_long_flag_unless_overridden() -> None:
    assert cli_env.variable("--worker-count") == "DESPINA_WORKER_COUNT"
    assert cli_env.variable("--name", {"--name": "TOOL_NAME"}) == "TOOL_NAME"
    text = parser().format_help()
    for name in ("DESPINA_WORKER_COUNT", "DESPINA_MODE", "TOOL_NAME", "DESPINA_VERBOSE", "DESPINA_NO_COLOR"):
        assert f"[env: {name}]" in text
    assert "DESPINA_HELP" not in text and "command line wins" in text
    assert "secret-knob" not in text and "DESPINA_SECRET_KNOB" not in text  # a hidden flag stays hidden


def test_environment_beats_default_and_command_line_beats_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parser().parse_args([]).worker_count == 4
    monkeypatch.setenv("DESPINA_WORKER_COUNT", "8")
    monkeypatch.setenv("DESPINA_MODE", "slow")
    monkeypatch.setenv("TOOL_NAME", "x")
    monkeypatch.setenv("DESPINA_SECRET_KNOB", "5")
    args = parser().parse_args([])
    assert (args.worker_count, args.mode, args.name, args.secret_knob) == (8, "slow", "x", 5)
    assert getattr(args, cli_env.SOURCES) == {"--worker-count": "DESPINA_WORKER_COUNT", "--mode": "DESPINA_MODE",
                                              "--name": "TOOL_NAME", "--secret-knob": "DESPINA_SECRET_KNOB"}
    args = parser().parse_args(["--worker-count", "2", "--mode", "fast"])
    assert (args.worker_count, args.mode) == (2, "fast")
    assert getattr(args, cli_env.SOURCES) == {"--name": "TOOL_NAME", "--secret-knob": "DESPINA_SECRET_KNOB"}


@pytest.mark.parametrize("value, verbose", [("1", True), ("TRUE", True), ("on", True), ("yes", True),
                                            ("0", False), ("off", False), ("No", False), ("", False)])
def test_switches(monkeypatch: pytest.MonkeyPatch, value: str, verbose: bool) -> None:
    monkeypatch.setenv("DESPINA_VERBOSE", value)
    monkeypatch.setenv("DESPINA_NO_COLOR", value)
    args = parser().parse_args([])
    assert args.verbose is verbose and args.color is not verbose
    assert parser().parse_args(["--verbose", "--no-color"]).verbose is True


@pytest.mark.parametrize("name, value, words", [
    ("DESPINA_WORKER_COUNT", "many", "not a valid int"),
    ("DESPINA_MODE", "medium", "choose from fast, slow"),
    ("DESPINA_VERBOSE", "perhaps", "expected one of 1, true"),
])
def test_a_bad_value_is_one_line_naming_the_variable(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                                     name: str, value: str, words: str) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(SystemExit) as done:
        parser().parse_args([])
    assert done.value.code == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert len(errors) == 1 and f"{name}={value!r}" in errors[0] and words in errors[0], errors


def test_a_bad_value_on_the_command_line_reads_as_before(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DESPINA_WORKER_COUNT", "3")
    with pytest.raises(SystemExit):
        parser().parse_args(["--worker-count", "many"])
    assert "argument --worker-count: invalid int value: 'many'" in capsys.readouterr().err


def test_blame_names_the_variables_of_the_flags_a_message_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DESPINA_WORKER_COUNT", "0")
    args = parser().parse_args([])
    assert cli_env.blame("--worker-count must be positive", args) == \
        "--worker-count must be positive (--worker-count is DESPINA_WORKER_COUNT)"
    assert cli_env.blame("--worker-countdown is wrong", args) == "--worker-countdown is wrong"
    assert cli_env.blame("--mode is wrong", args) == "--mode is wrong"  # set on no variable


def test_only_boolean_switches_have_an_environment_form() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--level", action="store_const", const=3)
    with pytest.raises(TypeError, match="--level"):
        cli_env.bind(p)
