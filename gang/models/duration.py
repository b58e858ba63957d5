"""Go durations (``metav1.Duration``: "90s", "10m", "1h30m") as seconds.

Why here: queue objects carry them (KAI's ``reclaimMinRuntime``) and so does gang's own
annotation on the other queue APIs; users write them as they would for any Kubernetes object, so
they are read the way the API server's Go code reads them (``time.ParseDuration``), with a message
that names what was wrong.
"""

from __future__ import annotations

import re

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


class DurationError(ValueError):
    """Not a Go duration."""


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string; "0" alone is zero, a sign is allowed, a unit is not
    optional otherwise ("10" is refused, as ``time.ParseDuration`` refuses it)."""
    value = text.strip()
    sign = -1.0 if value.startswith("-") else 1.0
    body = value.lstrip("+-")
    if body == "0":
        return 0.0
    if not body:
        raise DurationError(f"{text!r} is not a duration (e.g. 90s, 10m, 1h30m)")
    total, at = 0.0, 0
    while at < len(body):
        match = _PART.match(body, at)
        if match is None:
            raise DurationError(f"{text!r} is not a duration (e.g. 90s, 10m, 1h30m)")
        total += float(match.group(1)) * _UNITS[match.group(2)]
        at = match.end()
    return sign * total
