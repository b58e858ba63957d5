"""``gang sim serve``: the Kubernetes API simulator on its own, for kubectl, what-if runs and
benchmarks, with its fault knobs on the command line."""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gang.sim.latency import ApiLatency, parse_latency
from gang.sim.resources import DEFAULT_KUBERNETES_VERSION, KUBERNETES_VERSIONS

#: the node pools served when neither --nodes nor --from-snapshot says otherwise
DEFAULT_NODES = "8:gpu=8,zones=2"

if TYPE_CHECKING:
    from gang.sim.cluster import SimCluster


def _api_latency(spec: str) -> ApiLatency | None:
    try:
        return parse_latency(spec)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sim = sub.add_parser("sim", help="the Kubernetes API simulator")
    sim_sub = sim.add_subparsers(dest="sim_command", required=True)
    serve = sim_sub.add_parser(
        "serve",
        help="serve a simulated cluster over HTTP and write a kubeconfig for it",
        description="Serve a simulated Kubernetes API. Node pools: COUNT[:key=value,...] "
        "separated by ';', e.g. '100:gpu=8,zones=4'. See gang/sim/nodespec.py.",
    )
    serve.add_argument(
        "--nodes",
        default=None,
        help=f"node pools (default: {DEFAULT_NODES}; with --from-snapshot: none, and any "
        "given are added to the snapshot's nodes)",
    )
    serve.add_argument(
        "--from-snapshot",
        type=Path,
        metavar="FILE",
        help="replay a cluster snapshot (gang snapshot -o FILE): its nodes, pods and groups",
    )
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8001)
    serve.add_argument(
        "--kubeconfig",
        type=Path,
        default=Path("gang-sim.kubeconfig"),
        help="where to write the kubeconfig (default: %(default)s)",
    )
    serve.add_argument("--token", help="require this bearer token (written into the kubeconfig)")
    serve.add_argument(
        "--kubelet",
        action="store_true",
        help="run the kubelet stand-in: bound pods start and finish",
    )
    serve.add_argument(
        "--kubelet-start-delay",
        type=float,
        default=None,
        metavar="SECONDS",
        help="with --kubelet: seconds from a binding to Running (default: 0.5)",
    )
    serve.add_argument(
        "--history-size",
        type=int,
        default=10_000,
        help="watch events retained per resource before 410 Expired",
    )
    serve.add_argument("--bookmark-interval", type=float, default=60.0)
    serve.add_argument(
        "--kubernetes-version",
        choices=KUBERNETES_VERSIONS,
        default=DEFAULT_KUBERNETES_VERSION,
        help="the release whose APIs are served: the native scheduling.k8s.io gang API "
        "differs (default: %(default)s)",
    )
    serve.add_argument(
        "--api-latency",
        type=_api_latency,
        default="none",
        metavar="SPEC",
        help="model a real API server's write path: every POST/PUT/PATCH/DELETE waits NETWORK "
        "(client, network, admission), then queues for one of WORKERS servers for an "
        "exponential SERVICE time, and is answered 429 (Retry-After: 1) when INFLIGHT writes are "
        "already queued or in service; reads and watches are free. 'none' (the default) turns "
        "it off; 'real' is calibrated on a real kube-apiserver (714 bindings/s at 64 in flight, "
        "909 at 128): workers=16,service=17.5ms,network=72ms,inflight=200; 'many-core' on a "
        "16-core one (3,429 at 128, 4,227 at 256): workers=64,service=15ms,network=22ms; or "
        "give any of "
        "workers=N,service=DURATION,network=DURATION,inflight=N|none,seed=N (durations in ms or "
        "s; the rest from 'real')",
    )
    faults = serve.add_argument_group("fault injection")
    faults.add_argument("--latency", type=float, default=0.0, help="seconds added per request")
    faults.add_argument("--latency-jitter", type=float, default=0.0)
    faults.add_argument("--error-rate", type=float, default=0.0, help="probability of a 500")
    faults.add_argument("--throttle-rate", type=float, default=0.0, help="probability of a 429")
    faults.add_argument(
        "--watch-drop-after",
        type=float,
        default=None,
        help="close every watch stream after this many seconds",
    )
    faults.add_argument(
        "--drop-event-rate",
        type=float,
        default=0.0,
        help="probability that a watch event is silently not sent (a relist repairs it)",
    )
    faults.add_argument(
        "--binding-latency", type=float, default=0.0, help="seconds added per pods/binding"
    )
    faults.add_argument(
        "--seed",
        type=int,
        default=None,
        help="seed for the fault RNG (and for --api-latency's, unless its SPEC has one)",
    )


class UsageError(Exception):
    """A flag is wrong: the message names it."""


def cluster_from_args(args: argparse.Namespace) -> SimCluster:
    """The simulated cluster the flags describe (not started); UsageError for a bad flag."""
    from gang.models.snapshot import load as load_snapshot
    from gang.sim.cluster import SimCluster
    from gang.sim.faults import Faults
    from gang.sim.kubelet import KubeletConfig
    from gang.sim.nodespec import NodeSpecError, parse_pools

    snapshot = None
    if args.from_snapshot is not None:
        try:
            snapshot = load_snapshot(args.from_snapshot)
        except (OSError, ValueError) as err:
            raise UsageError(f"--from-snapshot: {err}") from None
    nodes = args.nodes if args.nodes is not None else ("" if snapshot else DEFAULT_NODES)
    try:
        pools = parse_pools(nodes) if nodes else []
    except NodeSpecError as err:
        raise UsageError(f"--nodes: {err}") from None
    kubelet: KubeletConfig | None = None
    if args.kubelet_start_delay is not None:
        if not args.kubelet:
            raise UsageError("--kubelet-start-delay needs --kubelet")
        if args.kubelet_start_delay < 0:
            raise UsageError("--kubelet-start-delay must not be negative")
        kubelet = KubeletConfig(start_delay=args.kubelet_start_delay)
    elif args.kubelet:
        kubelet = KubeletConfig()
    faults = Faults(
        latency=args.latency,
        latency_jitter=args.latency_jitter,
        error_rate=args.error_rate,
        throttle_rate=args.throttle_rate,
        watch_drop_after=args.watch_drop_after,
        drop_event_rate=args.drop_event_rate,
        binding_latency=args.binding_latency,
        seed=args.seed,
    )
    latency: ApiLatency | None = args.api_latency
    if latency is not None and latency.seed is None:
        latency.reseed(args.seed)
    return SimCluster(
        pools,
        host=args.host,
        port=args.port,
        kubelet=kubelet,
        faults=faults,
        latency=latency,
        history_size=args.history_size,
        bookmark_interval=args.bookmark_interval,
        token=args.token,
        kubeconfig_path=args.kubeconfig.resolve(),
        kubernetes_version=args.kubernetes_version,
        snapshot=snapshot,
    )


async def command(args: argparse.Namespace) -> int:
    try:
        cluster = cluster_from_args(args)
    except UsageError as err:
        print(f"gang sim serve: {err}", file=sys.stderr)
        return 2
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with cluster:
        nodes = cluster.store.count(cluster.api.rt_nodes.storage_key)
        print(f"gang sim: serving {cluster.url} with {nodes} nodes", flush=True)
        print(f"gang sim: kubeconfig written to {cluster.kubeconfig_path}", flush=True)
        if (latency := cluster.latency) is not None:
            print(
                f"gang sim: API latency model: {latency.workers} workers x "
                f"{latency.service_seconds * 1000:g} ms, network {latency.network_seconds * 1000:g}"
                f" ms, at most {latency.max_inflight or 'unlimited'} writes in flight",
                flush=True,
            )
        print(f"  kubectl --kubeconfig {cluster.kubeconfig_path} get nodes,pods -A", flush=True)
        await stop.wait()
    return 0
