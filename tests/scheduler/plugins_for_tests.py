"""Third-party plugins that misbehave on purpose, loaded by dotted path in tests/scheduler/test_plugins.py."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from gang.scheduling.framework import (
    SKIP,
    Allow,
    Deny,
    Mask,
    NodeFilterInput,
    PermitDecision,
    PluginContext,
    ScoreInput,
    Scores,
)
from gang.scheduling.gang import Gang
from gang.state.cache import Snapshot
from gang.state.nodefacts import NodeFacts
from gang.state.podinfo import Constraints

Key = tuple[str, str]


def _labelled(gang: Gang, label: str) -> bool:
    return any(label in p.labels for p in gang.members.values())


class Exploding:
    """A Filter that raises for pods labelled ``explode``."""

    name = "Exploding"

    def filter_nodes(self, s: NodeFilterInput) -> Mask:
        if "explode" in s.pod.labels:
            raise RuntimeError("boom")
        return np.ones(len(s.snap.names), dtype=np.bool_)

    def reasons(self, s: NodeFilterInput, row: int) -> list[str]:
        return []


class ExplodingStatic:
    """A static (per node) Filter that raises for pods tolerating a taint named ``explode``."""

    name = "ExplodingStatic"

    def filter(self, constraints: Constraints, node: NodeFacts) -> str | None:
        if any(t.key == "explode" for t in constraints.tolerations):
            raise RuntimeError("static boom")
        return None


class Sleepy:
    """A Score that takes 300 ms for pods labelled ``slow``."""

    name = "Sleepy"

    def score(self, s: ScoreInput) -> Scores:
        return np.zeros(len(s.candidates))

    def normalize(self, scores: Scores) -> Scores:
        return scores


class SleepyScore(Sleepy):
    name = "SleepyScore"

    def __init__(self, args: dict[str, Any]) -> None:
        self.delay = float(args.get("delay", 0.3))

    def score(self, s: ScoreInput) -> Scores:
        time.sleep(self.delay)
        return np.zeros(len(s.candidates))


class HangingBind:
    """A Bind plugin that hangs for gangs labelled ``hang`` and SKIPs the others."""

    name = "HangingBind"

    async def bind(self, gang: Gang, pod: Key, node: str) -> str | None:
        if _labelled(gang, "hang"):
            await asyncio.sleep(3600)
        return SKIP


class Recorder:
    """Reserve plugins that record the order of their calls (shared log)."""

    log: ClassVar[list[str]] = []
    name = "Recorder"

    def reserve(self, gang: Gang, assignments: Mapping[Key, str]) -> str | None:
        self.log.append(f"reserve:{self.name}")
        return None

    def unreserve(self, gang: Gang, assignments: Mapping[Key, str]) -> None:
        self.log.append(f"unreserve:{self.name}")


class SecondRecorder(Recorder):
    name = "SecondRecorder"


class Refuser(Recorder):
    """Refuses to reserve for gangs labelled ``refuse``."""

    name = "Refuser"

    def reserve(self, gang: Gang, assignments: Mapping[Key, str]) -> str | None:
        self.log.append(f"reserve:{self.name}")
        return "no licence left" if _labelled(gang, "refuse") else None


class DenyLabelled:
    """A Permit plugin denying gangs labelled ``deny``."""

    name = "DenyLabelled"

    def permit(self, gang: Gang) -> PermitDecision:
        return Deny("deny label set") if _labelled(gang, "deny") else Allow()


class Broken:
    """A plugin whose factory rejects its arguments."""

    name = "Broken"

    def __init__(self, args: dict[str, Any]) -> None:
        raise ValueError(f"bad args {sorted(args)}")

    def sort_key(self, gang: Gang) -> tuple[int]:
        return (0,)


class FreeGPUsNote:
    """A PostFilter that adds to the failure message how many GPUs the snapshot shows free."""

    name = "FreeGPUsNote"

    def __init__(self, args: dict[str, Any], ctx: PluginContext) -> None:
        self.index = ctx.index

    def post_filter(self, gang: Gang, snap: Snapshot, message: str) -> str | None:
        column = self.index.column("nvidia.com/gpu")
        free = int(snap.free[snap.valid, column].sum()) if column < snap.free.shape[1] else 0
        return f"{message}; {free} GPUs free"
