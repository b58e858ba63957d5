"""core/v1 Events and events.k8s.io/v1 Events are one object seen through two APIs.

A real apiserver stores both in one place, so an Event a scheduler posts through
events.k8s.io/v1 shows up in ``kubectl get events`` (core/v1) and ``kubectl describe pod``. The
simulator does the same: storage holds the core/v1 shape and these two functions convert.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

# events.k8s.io/v1 name → core/v1 name; fields not listed have the same name in both.
_RENAMED = {
    "regarding": "involvedObject",
    "note": "message",
    "reportingController": "reportingComponent",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
}
_TO_V1 = {core: v1 for v1, core in _RENAMED.items()}


def to_core(event: Obj) -> Obj:
    """events.k8s.io/v1 → core/v1 (the storage shape)."""
    out = {_RENAMED.get(k, k): v for k, v in event.items()}
    out["apiVersion"] = "v1"
    out["kind"] = "Event"
    out.setdefault("involvedObject", {})
    return out


def to_events_v1(event: Obj) -> Obj:
    """core/v1 (storage) → events.k8s.io/v1."""
    out = {_TO_V1.get(k, k): v for k, v in event.items()}
    out["apiVersion"] = "events.k8s.io/v1"
    out["kind"] = "Event"
    return out
