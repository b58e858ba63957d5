"""The pod watch's MODIFIED events are decoded only as far as a binding's confirmation reads
them (``gang.kube.decoding``); everything else the tracker reads whole. Over real HTTP: the scheduler's
own informer, the simulator's watch lines."""

from __future__ import annotations

from typing import Any

import pytest

import gang.scheduling.tracker as tracker
from gang.kube.decoding import Decoding, LazyPod
from gang.state.cache import PodState
from tests.scheduler.conftest import eventually, gang_env, gang_pod, podgroup


@pytest.fixture
def digested(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Per pod name, how many of its watch updates were digested."""
    counts: dict[str, int] = {}
    original = tracker.DIGESTED_PODS

    def counting(line: bytes) -> dict[str, Any]:
        event: dict[str, Any] = original.event(line)
        pod = event.get("object")
        if isinstance(pod, LazyPod):
            name = pod["metadata"]["name"]
            counts[name] = counts.get(name, 0) + 1
        return event

    monkeypatch.setattr(tracker, "DIGESTED_PODS", Decoding(original.page, counting))
    return counts


@pytest.fixture
def decoded_whole(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Per pod name, how many of its digested updates the tracker had to decode whole."""
    counts: dict[str, int] = {}
    original = tracker.whole

    def counting(pod: dict[str, Any]) -> dict[str, Any]:
        if isinstance(pod, LazyPod):
            name = pod["metadata"]["name"]
            counts[name] = counts.get(name, 0) + 1
        return original(pod)

    monkeypatch.setattr(tracker, "whole", counting)
    return counts


async def test_a_gangs_confirmations_are_read_from_the_digest(
    digested: dict[str, int], decoded_whole: dict[str, int]
) -> None:
    async with gang_env("2:gpu=8") as env:
        api = env.api
        await api.create_podgroup(podgroup("quad", 4))
        await api.create_pods([gang_pod(f"quad-{i}", "quad", gpu=2) for i in range(4)])

        async def bound() -> bool:
            cache = env.scheduler.cache.pods  # bound as the watch showed it, not as assumed
            keys = [("default", f"quad-{i}") for i in range(4)]
            return all(k in cache and cache[k].state is PodState.BOUND for k in keys)

        await eventually(bound)
        nodes = await api.bound()
        for i in range(4):
            record = env.scheduler.cache.pods[("default", f"quad-{i}")]
            assert record.node == nodes[f"quad-{i}"]
            assert record.info is not None and record.info.assigned
        quad = {f"quad-{i}" for i in range(4)}
        assert quad <= digested.keys(), digested  # each binding came back as a MODIFIED line
        assert not quad & decoded_whole.keys(), decoded_whole  # ... and none was decoded whole


async def test_an_update_that_is_no_confirmation_is_read_whole(
    digested: dict[str, int], decoded_whole: dict[str, int]
) -> None:
    async with gang_env("1:gpu=8") as env:
        api = env.api
        await api.create_pods([gang_pod("mover", "before", gpu=1)])  # no PodGroup: it waits

        async def member_of(group: str) -> bool:
            gangs = env.scheduler.state.gangs
            return any(
                k.group == group and ("default", "mover") in g.members for k, g in gangs.items()
            )

        await eventually(lambda: member_of("before"))
        await api.core.patch_namespaced_pod(
            "mover", "default", {"metadata": {"labels": {"scheduling.x-k8s.io/pod-group": "after"}}}
        )
        await eventually(lambda: member_of("after"))  # its new label came from the whole pod
        assert decoded_whole.get("mover", 0) >= 1 and digested.get("mover", 0) >= 1
        await api.create_podgroup(podgroup("after", 1))

        async def bound() -> bool:
            return "mover" in await api.bound()

        await eventually(bound)
