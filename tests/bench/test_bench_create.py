"""The benchmark's creates survive an API server that stalls or sheds load, and fail loudly on
anything else.

Seen on the real kube-apiserver v1.23 on 2 cores: etcd stalled, the server timed handlers out
and never answered on their connections, and the benchmark waited for ever with 891 of 8,000
pods created. A stand-in server here plays exactly those answers.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from aiohttp import web

from gang.bench.cluster import ApiStatusError, BenchCluster
from tests.stand_in import serve

PODS = "/api/v1/namespaces/bench/pods"


async def test_a_create_is_tried_again_after_silence_and_load_and_fails_on_a_refusal() -> None:
    from kubernetes_asyncio import client

    tries: Counter[str] = Counter()
    stored: set[str] = set()
    done = asyncio.Event()  # the silent handler waits for it (so the server can shut down)

    async def create(request: web.Request) -> web.Response:
        name = (await request.json())["metadata"]["name"]
        tries[name] += 1
        if name in stored:
            return web.json_response({"reason": "AlreadyExists"}, status=409)
        if name == "silent" and tries[name] == 1:
            stored.add(name)  # stored, but the answer never comes
            await done.wait()
        if name == "shed" and tries[name] <= 2:
            return web.json_response({"reason": "TooManyRequests"}, status=429)
        if name == "invalid":
            return web.json_response({"reason": "Invalid"}, status=422)
        stored.add(name)
        return web.json_response({"metadata": {"name": name}}, status=201)

    async for url in serve(create):
        configuration = client.Configuration()
        configuration.host = url
        api = client.ApiClient(configuration)
        try:
            cluster = BenchCluster(api, request_timeout=0.3)
            pod: dict[str, Any] = {"metadata": {"name": "silent"}}
            await cluster.create(PODS, pod)
            await cluster.create(PODS, {"metadata": {"name": "shed"}})
            assert stored == {"silent", "shed"}
            assert (tries["silent"], tries["shed"]) == (2, 3)
            with pytest.raises(ApiStatusError) as refused:
                await cluster.create(PODS, {"metadata": {"name": "invalid"}})
            assert refused.value.status == 422 and tries["invalid"] == 1
        finally:
            done.set()
            await api.close()
