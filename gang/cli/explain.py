"""``gang explain NAMESPACE/NAME`` (and ``kubectl gang explain``): why a gang is pending.

Where the answer comes from, first that works:

1. ``--scheduler URL``: the running scheduler's read-only ``/debug/explain`` endpoint;
2. else, with a kubeconfig, the same endpoint through the API server's service proxy
   (``gang-system/gang-scheduler-metrics``, as deployed by ``manifests/``; the user needs
   ``get`` on ``services/proxy`` there): what the live scheduler knows;
3. else (no scheduler answers, or ``--from-snapshot FILE``): a copy of the cluster with gang's
   own scheduler run on it (``gang.whatif``), so the answer is the one ``gang run`` would give.

Exit code: 0 explained, 1 the gang is unknown or no answer could be had.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

Obj = dict[str, Any]
SERVICE_NAMESPACE = "gang-system"
SERVICE = "gang-scheduler-metrics:http-metrics"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    explain = sub.add_parser(
        "explain",
        help="why is this gang pending, and what would unblock it",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    explain.add_argument("gang", metavar="NAMESPACE/NAME", help="the group (or a lone pod)")
    explain.add_argument("--scheduler", metavar="URL", help="the scheduler's HTTP endpoint")
    explain.add_argument("--kubeconfig", help="path to a kubeconfig (default: ~/.kube/config)")
    explain.add_argument("--from-snapshot", type=Path, metavar="FILE", help="a gang snapshot")
    explain.add_argument("--wait", type=float, default=30.0, help="snapshot mode: longest wait")
    explain.add_argument("-o", "--output", choices=["text", "json"], default="text")


async def command(args: argparse.Namespace) -> int:
    from gang.app.explain import render

    namespace, _, name = args.gang.partition("/")
    if not namespace or not name:
        print("gang explain: name the gang as NAMESPACE/NAME", file=sys.stderr)
        return 2
    path = f"/debug/explain/{namespace}/{name}"
    answer: Obj | None = None
    source = ""
    try:
        if args.scheduler:
            answer, source = await from_url(args.scheduler.rstrip("/") + path), args.scheduler
        elif args.from_snapshot is None:
            answer = await through_proxy(args.kubeconfig, path)
            source = "the running scheduler (through the API server)" if answer else ""
        if answer is None:
            answer = await _from_copy(args, namespace, name)
            source = "a copy of the cluster with gang's scheduler run on it (no scheduler answered)"
    except (OSError, ValueError, LookupError) as err:
        print(f"gang explain: {err}", file=sys.stderr)
        return 1
    if "error" in answer:
        print(f"gang explain: {answer['error']}", file=sys.stderr)
        return 1
    if args.output == "json":
        sys.stdout.write(orjson.dumps(answer, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(render(answer))
        print(f"  (from {source})")
    return 0


async def from_url(url: str) -> Obj:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(url) as resp:
        body = await resp.read()
        if resp.status not in (200, 404, 503):
            raise LookupError(f"{url}: HTTP {resp.status}")
        answer: Obj = orjson.loads(body)
        return answer


async def through_proxy(kubeconfig: str | None, path: str) -> Obj | None:
    """The live scheduler's answer through the API server's service proxy; None when no
    scheduler answers there (not deployed, not leading, no right to proxy)."""
    from gang.kube.client import make_api_client

    client = await make_api_client(kubeconfig)
    proxy = f"/api/v1/namespaces/{SERVICE_NAMESPACE}/services/{SERVICE}/proxy{path}"
    try:
        for _ in range(3):  # the Service spreads over replicas; only the leader knows
            resp = await client.call_api(
                proxy,
                "GET",
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
            )
            body = await resp.read()
            if resp.status in (200, 404):
                answer: Obj = orjson.loads(body)
                if answer.get("kind") != "Status":  # the API server's own 404: no service
                    return answer
                return None
    except Exception:  # any failure means: ask a copy instead
        return None
    finally:
        await client.close()
    return None


async def _from_copy(args: argparse.Namespace, namespace: str, name: str) -> Obj:
    from gang import whatif
    from gang.app.snapshot import snapshot_of

    snapshot = await snapshot_of(args.from_snapshot, args.kubeconfig)
    full = f"{namespace}/{name}"
    async with whatif.replay(snapshot) as copy:
        answers = await copy.judged([full], args.wait)
    answer = answers[full]
    if answer.get("state") == "queued" and "queue" not in answer:
        return {"error": f"no gang {full} in the cluster"}
    return answer
