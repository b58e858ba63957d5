"""The codebase's own rules, checked on every test run: lint, types, and import layers.

These run the same tools a developer runs by hand, so a clean CI means clean code — and the
import-layer check is itself tested: a planted wrong import must make it fail.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=300, check=False)


def test_ruff_lint_clean() -> None:
    result = _run(str(BIN / "ruff"), "check", "gang", "tests", "examples")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_clean() -> None:
    result = _run(str(BIN / "ruff"), "format", "--check", "gang", "tests", "examples")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_clean() -> None:
    result = _run(str(BIN / "mypy"))
    assert result.returncode == 0, result.stdout + result.stderr
    plugins = sorted(str(p) for p in (ROOT / "examples" / "plugins").glob("*.py"))
    result = _run(str(BIN / "mypy"), "--strict", *plugins)  # the example plugins type-check too
    assert result.returncode == 0, result.stdout + result.stderr


def test_import_layers_kept() -> None:
    result = _run(str(BIN / "lint-imports"), "--no-cache")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_import_layer_check_catches_a_wrong_import(tmp_path: Path) -> None:
    """Copy the package, plant an upward import (models → sim) and an import circle inside
    gang.state (labels → podinfo, under TYPE_CHECKING, while podinfo imports labels), and
    expect the check to fail on both."""
    shutil.copytree(ROOT / "gang", tmp_path / "gang", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    bad = tmp_path / "gang" / "models" / "planted.py"
    bad.write_text(
        '"""A deliberately wrong import."""\n\nfrom gang.sim import store  # noqa: F401\n'
    )
    labels = tmp_path / "gang" / "state" / "labels.py"
    labels.write_text(
        labels.read_text() + "\nif TYPE_CHECKING:\n    from gang.state.podinfo import PodInfo\n"
    )
    env_path = f"PYTHONPATH={tmp_path}"
    result = subprocess.run(
        ["env", env_path, str(BIN / "lint-imports"), "--no-cache"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode != 0, result.stdout
    assert "gang.models.planted -> gang.sim.store" in result.stdout
    assert "No cycles are allowed in gang.state." in result.stdout


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = [b.split("```", 1)[0].strip() for b in readme.split("```sh\n")[1:3]]
    assert blocks[0].endswith("gang demo")
    assert "&& .venv/bin/pytest" in blocks[1]
    assert blocks[1] in (ROOT / ".ci" / "run").read_text()
