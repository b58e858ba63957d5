"""The ``gang`` command: one entry point, a subcommand per job.

``gang demo`` shows the product on an embedded simulated cluster; ``gang sim serve`` runs the
Kubernetes API simulator on its own for what-if runs and for kubectl; ``gang extender`` serves
gang's filters and scores to kube-scheduler as a scheduler extender. Subcommands import what
they need lazily so ``gang --help`` stays instant.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
import sys
from collections.abc import Sequence
from pathlib import Path


def _sim_serve_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sim = sub.add_parser("sim", help="the Kubernetes API simulator")
    sim_sub = sim.add_subparsers(dest="sim_command", required=True)
    serve = sim_sub.add_parser(
        "serve",
        help="serve a simulated cluster over HTTP and write a kubeconfig for it",
        description="Serve a simulated Kubernetes API. Node pools: COUNT[:key=value,...] "
        "separated by ';', e.g. '100:gpu=8,zones=4'. See gang/sim/nodespec.py.",
    )
    serve.add_argument(
        "--nodes", default="8:gpu=8,zones=2", help="node pools (default: %(default)s)"
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
        "--history-size",
        type=int,
        default=10_000,
        help="watch events retained per resource before 410 Expired",
    )
    serve.add_argument("--bookmark-interval", type=float, default=60.0)
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
    faults.add_argument("--seed", type=int, default=None, help="seed for the fault RNG")


async def _sim_serve(args: argparse.Namespace) -> int:
    from gang.sim.cluster import SimCluster
    from gang.sim.faults import Faults
    from gang.sim.nodespec import NodeSpecError, parse_pools

    try:
        pools = parse_pools(args.nodes)
    except NodeSpecError as err:
        print(f"gang sim serve: --nodes: {err}", file=sys.stderr)
        return 2
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
    cluster = SimCluster(
        pools,
        host=args.host,
        port=args.port,
        kubelet=args.kubelet,
        faults=faults,
        history_size=args.history_size,
        bookmark_interval=args.bookmark_interval,
        token=args.token,
        kubeconfig_path=args.kubeconfig.resolve(),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with cluster:
        nodes = cluster.store.count(cluster.api.rt_nodes.storage_key)
        print(f"gang sim: serving {cluster.url} with {nodes} nodes", flush=True)
        print(f"gang sim: kubeconfig written to {cluster.kubeconfig_path}", flush=True)
        print(f"  kubectl --kubeconfig {cluster.kubeconfig_path} get nodes,pods -A", flush=True)
        await stop.wait()
    return 0


def _run_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser(
        "run",
        help="run the gang scheduler against a cluster",
        description="Schedule gangs on the cluster the kubeconfig (or in-cluster config) points at. "
        "Settings come from --config, then GANG_<SECTION>__<FIELD> environment variables, then flags.",
    )
    run.add_argument(
        "--config", type=Path, help="YAML settings file (see manifests/configmap.yaml)"
    )
    run.add_argument(
        "--kubeconfig", help="path to a kubeconfig (default: in-cluster, then ~/.kube/config)"
    )
    run.add_argument(
        "--scheduler-name", help="spec.schedulerName to serve (default gang-scheduler)"
    )
    run.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="elect a leader through a Lease; only the leader schedules",
    )
    run.add_argument("--lease-namespace", help="namespace of the leader election Lease")
    run.add_argument("--qps", type=float, help="client write rate limit (requests/s)")
    run.add_argument("--burst", type=int, help="client write burst")
    run.add_argument(
        "--default-schedule-timeout",
        type=float,
        help="Permit wait when a PodGroup sets no scheduleTimeoutSeconds (seconds)",
    )
    run.add_argument("--topology-key", help="node label gang packing keeps gangs inside")
    run.add_argument(
        "--port", type=int, help="port of /healthz /readyz /metrics /debug/gangs (0: any)"
    )
    run.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    run.add_argument("--log-format", choices=["text", "json"])


async def _run(args: argparse.Namespace) -> int:
    from gang.app.config import ConfigError, load_settings
    from gang.app.logs import configure_logging
    from gang.app.process import Process

    overrides = {
        "kubeconfig": args.kubeconfig,
        "scheduler": {
            "scheduler_name": args.scheduler_name,
            "qps": args.qps,
            "burst": args.burst,
            "default_schedule_timeout_seconds": args.default_schedule_timeout,
            "topology_key": args.topology_key,
        },
        "leader_election": {"enabled": args.leader_elect, "lease_namespace": args.lease_namespace},
        "server": {"port": args.port},
        "logging": {"level": args.log_level, "format": args.log_format},
    }
    from gang.app.profiles import ProfileError, check_profiles

    try:
        settings = load_settings(args.config, overrides)
        check_profiles(settings.scheduler)
    except (ConfigError, ProfileError) as err:
        print(f"gang run: {err}", file=sys.stderr)
        return 2
    configure_logging(settings.logging.level, settings.logging.format)
    return await Process(settings).run()


def _extender_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ext = sub.add_parser(
        "extender",
        help="serve gang's filters and scores to kube-scheduler as a scheduler extender",
        description="Serve kube-scheduler's extender protocol: POST PREFIX/filter, "
        "PREFIX/prioritize and (with --enable-bind) PREFIX/bind. "
        "See manifests/extender/ for kube-scheduler's side.",
    )
    ext.add_argument(
        "--kubeconfig",
        help="path to a kubeconfig, used with --node-cache or --enable-bind "
        "(default: in-cluster, then ~/.kube/config)",
    )
    ext.add_argument("--host", default="127.0.0.1", help="listen address (default: %(default)s)")
    ext.add_argument("--port", type=int, default=8888, help="listen port (default: %(default)s)")
    ext.add_argument(
        "--prefix", default="/gang-extender", help="URL path prefix (default: %(default)s)"
    )
    ext.add_argument(
        "--config",
        type=Path,
        help="gang's settings file: filter and score with a profile's plugins (third-party ones too)",
    )
    ext.add_argument(
        "--profile", help="the profile (scheduler_name) to use from --config (default: the first)"
    )
    ext.add_argument(
        "--node-cache",
        action="store_true",
        help="watch nodes and pods and answer nodeCacheCapable requests (NodeNames) from that "
        "cache, with resources accounted",
    )
    ext.add_argument(
        "--enable-bind",
        action="store_true",
        help="serve the bind verb: bind pods through pods/binding (needs --token-file or "
        "--tls-client-ca, or --allow-unauthenticated-bind)",
    )
    ext.add_argument(
        "--allow-unauthenticated-bind",
        action="store_true",
        help="serve --enable-bind without authenticating callers; only for a listener nothing "
        "else can reach (127.0.0.1 in kube-scheduler's pod)",
    )
    ext.add_argument(
        "--token-file", type=Path, help="require 'Authorization: Bearer <file content>'"
    )
    ext.add_argument("--tls-cert", type=Path, help="serve HTTPS with this certificate (PEM)")
    ext.add_argument("--tls-key", type=Path, help="the certificate's private key (PEM)")
    ext.add_argument(
        "--tls-client-ca",
        type=Path,
        help="require client certificates signed by this CA (PEM), e.g. kube-scheduler's",
    )
    ext.add_argument(
        "--max-body-bytes",
        type=int,
        default=10 * 1024 * 1024,
        help="largest request body accepted (default: %(default)s)",
    )
    ext.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"], default="INFO")
    ext.add_argument("--log-format", choices=["text", "json"], default="text")


async def _extender(args: argparse.Namespace) -> int:
    from gang.app.logs import configure_logging
    from gang.extender.process import ExtenderProcess
    from gang.extender.server import (
        ExtenderConfig,
        bind_authentication_problem,
        server_ssl_context,
    )

    def fail(message: str) -> int:
        print(f"gang extender: {message}", file=sys.stderr)
        return 2

    if not 0 <= args.port <= 65535:
        return fail(f"--port: {args.port} is not a port number")
    if args.max_body_bytes < 1:
        return fail("--max-body-bytes must be at least 1")
    if (args.tls_cert is None) != (args.tls_key is None):
        return fail("--tls-cert and --tls-key go together")
    if args.tls_client_ca is not None and args.tls_cert is None:
        return fail("--tls-client-ca needs --tls-cert and --tls-key")
    if args.allow_unauthenticated_bind and not args.enable_bind:
        return fail("--allow-unauthenticated-bind only applies with --enable-bind")
    token = None
    if args.token_file is not None:
        try:
            token = args.token_file.read_text().strip()
        except OSError as err:
            return fail(f"--token-file: {err}")
        if not token:
            return fail(f"--token-file: {args.token_file} is empty")
    ssl_context = None
    if args.tls_cert is not None:
        try:
            ssl_context = server_ssl_context(
                str(args.tls_cert),
                str(args.tls_key),
                str(args.tls_client_ca) if args.tls_client_ca else None,
            )
        except (OSError, ValueError) as err:
            return fail(f"TLS: {err}")
    profile = None
    weights, topology_key = None, None
    if args.config is not None:
        from gang.app.config import ConfigError, load_settings
        from gang.app.profiles import ProfileError, build_profiles
        from gang.scheduling.framework import PluginContext
        from gang.state.resources import ResourceIndex

        try:
            scheduler = load_settings(args.config).scheduler
            profiles = build_profiles(scheduler, PluginContext(scheduler, ResourceIndex(), None))
        except (ConfigError, ProfileError) as err:
            return fail(str(err))
        name = args.profile or next(iter(profiles))
        if name not in profiles:
            return fail(f"--profile: no profile {name!r} in {args.config} (has {sorted(profiles)})")
        profile, weights, topology_key = profiles[name], scheduler.weights, scheduler.topology_key
    elif args.profile is not None:
        return fail("--profile needs --config")
    configure_logging(args.log_level, args.log_format)
    extender_config = ExtenderConfig(
        prefix=args.prefix,
        enable_bind=args.enable_bind,
        allow_unauthenticated_bind=args.allow_unauthenticated_bind,
        token=token,
        max_body_bytes=args.max_body_bytes,
        profile=profile,
    )
    if weights is not None and topology_key is not None:
        extender_config = dataclasses.replace(
            extender_config, weights=weights, topology_key=topology_key
        )
    problem = bind_authentication_problem(extender_config, ssl_context)
    if problem is not None:
        return fail(f"--enable-bind: {problem}")
    process = ExtenderProcess(
        extender_config,
        host=args.host,
        port=args.port,
        node_cache=args.node_cache,
        kubeconfig=args.kubeconfig,
        ssl_context=ssl_context,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    return await process.run(stop)


def _bench_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser(
        "bench",
        help="benchmark the scheduler against a simulated (or real) cluster",
        description="Runs `gang sim serve`, `gang run` and a driver as three processes and reports "
        "pods/s, gangs/s, time-to-full-gang, scheduler CPU per 1,000 pods and peak RSS.",
    )
    bench.add_argument("--config", type=Path, help="YAML file with BenchConfig fields")
    bench.add_argument("--nodes", help="node pools, e.g. 5000:gpu=8,cpu=64,memory=512Gi,zones=8")
    bench.add_argument("--pods", type=int, help="total pods")
    bench.add_argument("--gang-sizes", help="MIN-MAX members per gang, e.g. 4-64")
    bench.add_argument("--arrival", choices=["all", "stream"])
    bench.add_argument("--rate", type=float, help="gangs per second with --arrival stream")
    bench.add_argument("--seed", type=int)
    bench.add_argument("--sweep", help="comma-separated node counts, e.g. 500,1000,2000,5000")
    bench.add_argument(
        "--kubeconfig",
        help="benchmark a real cluster instead: creates kubelet-free gang-bench-* Nodes for --nodes "
        "(pods are pinned to them) and deletes all it created afterwards",
    )
    bench.add_argument("--out", type=Path, help="write the result(s) as JSON here")
    bench.add_argument("--html", type=Path, help="write an HTML report with charts here")
    bench.add_argument(
        "--placement",
        action="store_true",
        help="time only the placement decision for one gang (no I/O)",
    )
    bench.add_argument("--quiet", action="store_true", help="no progress output")


def _bench(args: argparse.Namespace) -> int:
    import yaml
    from pydantic import ValidationError

    from gang.bench.workload import BenchConfig

    if args.placement:
        from gang.bench.placement import placement_ms

        sizes = (args.gang_sizes or "64-64").split("-")
        figures = placement_ms(
            args.nodes or "5000:gpu=8,cpu=64,memory=512Gi,zones=8", members=int(sizes[-1])
        )
        print(
            f"placement of a {figures['members']:.0f}-member gang over {figures['nodes']:.0f} nodes: "
            f"median {figures['median_ms']:.1f} ms, p95 {figures['p95_ms']:.1f} ms "
            f"(first, cold caches: {figures['first_ms']:.1f} ms)"
        )
        return 0
    data: dict[str, object] = yaml.safe_load(args.config.read_text()) if args.config else {}
    for key, value in (
        ("nodes", args.nodes),
        ("pods", args.pods),
        ("arrival", args.arrival),
        ("rate", args.rate),
        ("seed", args.seed),
    ):
        if value is not None:
            data[key] = value
    if args.gang_sizes:
        low, _, high = args.gang_sizes.partition("-")
        data["min_gang"], data["max_gang"] = int(low), int(high or low)
    try:
        config = BenchConfig.model_validate(data)
    except ValidationError as err:
        print(f"gang bench: invalid benchmark: {err}", file=sys.stderr)
        return 2
    from gang.bench.cluster import BenchClusterError
    from gang.bench.report import html_report, table
    from gang.bench.runner import result_json, run_bench

    configs = [config]
    if args.sweep:
        pool = config.nodes.split(":", 1)[1] if ":" in config.nodes else ""
        configs = [
            config.model_copy(update={"nodes": f"{n}:{pool}" if pool else n})
            for n in args.sweep.split(",")
        ]
    try:
        results = [run_bench(c, args.kubeconfig, progress=not args.quiet) for c in configs]
    except BenchClusterError as err:
        print(f"gang bench: {err}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("gang bench: interrupted", file=sys.stderr)
        return 130
    print(table(results))
    if args.out:
        args.out.write_bytes(b"[" + b",".join(result_json(r) for r in results) + b"]\n")
    if args.html:
        args.html.write_text(html_report(results[-1]))
    return 0 if all(r.invariants_hold for r in results) else 1


def _chaos_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chaos = sub.add_parser(
        "chaos",
        help="run the scheduler through seeded faults and check its invariants",
        description="Runs `gang run` against an embedded simulator while the apiserver is slow, "
        "throttles, fails, cuts and drops watch events, expires history and restarts, and the "
        "scheduler is SIGKILLed and restarted; then all faults stop and the run must settle with "
        "no partial gang, no over-committed node, no pod bound twice and no fitting gang unbound.",
    )
    chaos.add_argument("--seed", type=int, default=1, help="first seed (default: %(default)s)")
    chaos.add_argument(
        "--duration", type=float, default=25.0, help="seconds of faults per run (%(default)s)"
    )
    chaos.add_argument("--runs", type=int, default=1, help="runs, with seeds SEED, SEED+1, ...")
    chaos.add_argument(
        "--mode",
        choices=["full", "crash"],
        default="full",
        help="full: every fault knob; crash: only scheduler SIGKILL + restart (%(default)s)",
    )
    chaos.add_argument(
        "--settle", type=float, default=30.0, help="longest settle after the faults (seconds)"
    )
    chaos.add_argument(
        "--nodes",
        default="12:gpu=8,cpu=32,memory=128Gi,zones=3",
        help="node pools of the simulated cluster (default: %(default)s)",
    )
    chaos.add_argument("--gangs", type=int, default=24, help="gangs in the workload")
    chaos.add_argument("--log-dir", type=Path, help="keep the scheduler's logs here")
    chaos.add_argument(
        "--log-level",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        default="WARNING",
        help="the scheduler's log level (default: %(default)s)",
    )
    chaos.add_argument("--quiet", action="store_true", help="report only failed runs")


def _chaos(args: argparse.Namespace) -> int:
    from gang.bench.chaos import run_many, summary
    from gang.bench.chaosplan import ChaosConfig

    if args.runs < 1 or args.duration <= 0 or args.settle <= 0 or args.gangs < 1:
        print(
            "gang chaos: --runs, --duration, --settle and --gangs must be positive", file=sys.stderr
        )
        return 2
    if args.log_dir is not None:
        args.log_dir.mkdir(parents=True, exist_ok=True)
    config = ChaosConfig(
        seed=args.seed,
        duration=args.duration,
        mode=args.mode,
        settle=args.settle,
        nodes=args.nodes,
        gangs=args.gangs,
    )
    try:
        results = run_many(
            config, args.runs, args.log_dir, quiet=args.quiet, log_level=args.log_level
        )
    except KeyboardInterrupt:
        print("gang chaos: interrupted", file=sys.stderr)
        return 130
    print(summary(results))
    return 0 if all(r.ok for r in results) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gang", description="A gang scheduler for Kubernetes.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="run the demo on an embedded simulated cluster")
    demo.add_argument("--nodes", default="16:gpu=8,zones=2", help="node pools for the demo cluster")
    _run_parser(sub)
    _bench_parser(sub)
    _sim_serve_parser(sub)
    _extender_parser(sub)
    _chaos_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.version:
        from gang import __version__

        print(__version__)
        return 0
    if args.command == "demo":
        from gang.demo import run_demo

        return asyncio.run(run_demo(args.nodes))
    if args.command == "bench":
        return _bench(args)
    if args.command == "run":
        return asyncio.run(_run(args))
    if args.command == "sim":
        return asyncio.run(_sim_serve(args))
    if args.command == "extender":
        return asyncio.run(_extender(args))
    if args.command == "chaos":
        return _chaos(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
