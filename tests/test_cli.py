"""The `despina` command itself: `python -m despina`, --version, the subcommand list."""

from __future__ import annotations

import subprocess
import sys

import pytest

import despina
from despina.cli import COMMANDS, main


def despina_module(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "despina", *args], capture_output=True, text=True, timeout=120)


def test_python_m_despina_is_the_despina_command() -> None:
    out = despina_module("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"despina {despina.__version__} (Python {sys.version.split()[0]})"
    out = despina_module("compile", "--help")
    assert out.returncode == 0 and "--emit" in out.stdout
    out = despina_module()
    assert out.returncode == 2 and "required: COMMAND" in out.stderr


def test_version_and_help_list_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith(f"despina {despina.__version__} ")
    with pytest.raises(SystemExit):
        main(["--help"])
    help_text = capsys.readouterr().out
    assert all(name in help_text for name in COMMANDS) and "--version" in help_text
