"""Settings come from a file, then the environment, then flags; a bad value names its field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gang.app.config import ConfigError, load_settings


def test_file_then_environment_then_flags(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        "scheduler:\n  qps: 50\n  burst: 60\n  scheduler_name: from-file\n"
        "leader_election:\n  enabled: true\nlogging:\n  format: json\n"
    )
    env = {
        "GANG_SCHEDULER__BURST": "70",
        "GANG_SCHEDULER__SCHEDULER_NAME": "from-env",
        "GANG_E2E_KUBECONFIG": "/not/ours",
        "HOME": "/root",
    }
    settings = load_settings(path, {"scheduler": {"scheduler_name": "from-flag", "qps": None}}, env)
    assert settings.scheduler.qps == 50  # file (flag unset)
    assert settings.scheduler.burst == 70  # environment beats file
    assert settings.scheduler.scheduler_name == "from-flag"  # flag beats both
    assert settings.leader_election.enabled is True
    assert settings.logging.format == "json"


def test_defaults_without_any_source() -> None:
    settings = load_settings(None, None, {})
    assert settings.scheduler.scheduler_name == "gang-scheduler"
    assert settings.leader_election.enabled is False
    assert settings.server.port == 8080


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("scheduler:\n  qps: -1\n", "scheduler.qps"),
        ("scheduler:\n  no_such_knob: 1\n", "scheduler.no_such_knob"),
        (
            "leader_election:\n  lease_duration_seconds: 5\n  renew_deadline_seconds: 10\n",
            "leader_election",
        ),
        ("logging:\n  format: xml\n", "logging.format"),
        ("server:\n  port: 70000\n", "server.port"),
    ],
)
def test_invalid_values_name_the_field(tmp_path: Path, text: str, field: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=rf"(?m)^  {field}"):
        load_settings(path, None, {})


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(tmp_path / "missing.yaml", None, {})
    bad = tmp_path / "bad.yaml"
    bad.write_text("scheduler: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(bad, None, {})
    listy = tmp_path / "list.yaml"
    listy.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="must hold a mapping"):
        load_settings(listy, None, {})


def test_gang_run_refuses_to_start_on_a_bad_config(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("scheduler:\n  bind_concurrency: 0\n")
    result = subprocess.run(
        [sys.executable, "-m", "gang", "run", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "scheduler.bind_concurrency" in result.stderr
    assert "must be 'auto' or a whole number from 1 to 1024 (got 0)" in result.stderr
