"""Loading ``Settings``: a YAML file, then the environment, then command-line flags.

Operators configure gang three ways — a ConfigMap mounted as a file, environment variables in
the Deployment, flags for a quick override — and expect the later to win. Whatever the source,
the result is validated as one pydantic model, so a bad value stops start-up with a message that
names the field and where it came from, instead of surfacing hours later as odd scheduling.

Environment variables are ``GANG_<SECTION>__<FIELD>`` (e.g. ``GANG_SCHEDULER__QPS=200``,
``GANG_LEADER_ELECTION__ENABLED=true``, ``GANG_KUBECONFIG=...``); values are parsed as YAML
scalars. Variables whose first part names no section are left alone.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gang.models.settings import Settings

ENV_PREFIX = "GANG_"


class ConfigError(Exception):
    """Start-up must stop; the message says which field and why."""


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _from_file(path: str | Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text()
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror or err}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {path} is not valid YAML: {err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping, not {type(data).__name__}")
    return data


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX):
            continue
        path = [part.lower() for part in name[len(ENV_PREFIX) :].split("__") if part]
        if not path or path[0] not in Settings.model_fields:
            continue  # GANG_* variables of other tools (e.g. the e2e tests') are not ours
        try:
            value = yaml.safe_load(raw) if raw != "" else ""
        except yaml.YAMLError:
            value = raw
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return out


def load_settings(
    path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """File < environment < ``overrides`` (flags, as a nested dict with None meaning unset)."""
    data: dict[str, Any] = _from_file(path) if path is not None else {}
    data = _merge(data, _from_env(os.environ if environ is None else environ))
    data = _merge(data, _drop_none(overrides or {}))
    try:
        return Settings.model_validate(data)
    except ValidationError as err:
        problems = []
        for problem in err.errors():
            where = ".".join(str(p) for p in problem["loc"]) or "(top level)"
            problems.append(f"  {where}: {problem['msg']} (got {problem.get('input')!r})")
        raise ConfigError("invalid configuration:\n" + "\n".join(problems)) from None


def _drop_none(values: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            nested = _drop_none(value)
            if nested:
                out[key] = nested
        elif value is not None:
            out[key] = value
    return out
