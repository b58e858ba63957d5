"""``gang bench``: the benchmark (end to end, sweep, placement alone, or the mixed stream of
``gang.bench.streams``) from flags or a YAML file."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    bench.add_argument(
        "--sweep",
        help="comma-separated node counts, e.g. 500,1000,2000,5000; a count given more than "
        "once (2000,2000,2000) is run that many times and summarised (median ratio, its range)",
    )
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
    bench.add_argument(
        "--rules",
        help="placement rules every member states against its gang: one-per-node, zone-spread "
        "(comma-separated)",
    )
    bench.add_argument(
        "--services",
        choices=("none", "per-replica"),
        help="Services around the workload: per-replica labels every member as the v1 training "
        "operator does and gives each its own headless Service selecting it (default: none)",
    )
    bench.add_argument(
        "--topology",
        metavar="ASK",
        help="with --placement: the gang asks for topology levels over the nodes' blocks and "
        "racks (node spec blocks=N,racks=M), e.g. required=block,preferred=rack; timed beside "
        "the same gang without the ask",
    )
    bench.add_argument(
        "--preemptor",
        type=int,
        help="after the workload is bound, a gang of this many members at a higher priority "
        "arrives and must preempt; reports the decision time and the time to its last binding",
    )
    bench.add_argument(
        "--preemptor-gpus", type=int, help="GPUs per preemptor member (default: 8, whole nodes)"
    )
    bench.add_argument(
        "--gpus-per-pod", type=int, help="GPUs per workload pod (default: 1; 2 fills 5,000 x 8)"
    )
    bench.add_argument(
        "--api-latency",
        metavar="SPEC",
        help="the simulator's API latency model (gang sim serve --api-latency): none "
        "(default), real (calibrated on a real kube-apiserver on 2 cores), many-core (on 16 "
        "cores), or knobs",
    )
    bench.add_argument(
        "--ceiling",
        metavar="LEVELS",
        help="bindings in flight per segment of the ceiling run (default 64,128,256): after "
        "gang's run the same pods are bound by a binder that knows the answer, and gang's "
        "pods/s is reported as a percentage of it; 'none' skips it",
    )
    bench.add_argument(
        "--queues",
        type=int,
        help="spread the gangs round-robin over this many KAI queues of equal weight (the "
        "scheduler then ranks queues by fair share before every gang)",
    )
    bench.add_argument("--quiet", action="store_true", help="no progress output")
    plan = bench.add_argument_group(
        "capacity planning",
        "replay a cluster snapshot (gang snapshot -o FILE), optionally with --nodes added and "
        "more gangs (-f), run gang's scheduler on it and report per gang: bound at once, the "
        "expected start of its reservation, preempting, not now, never",
    )
    plan.add_argument("--from-snapshot", type=Path, metavar="FILE", help="a gang snapshot")
    plan.add_argument("-f", "--filename", type=Path, action="append", default=[],
                      help="manifests of more gangs to place (repeat for more)")  # fmt: skip
    plan.add_argument("--namespace", default="default", help="namespace for -f objects")
    stream = bench.add_argument_group(
        "mixed-stream workload",
        "small gangs arriving and finishing, big gangs now and then, on the "
        "simulator with its kubelet stand-in; reports big gangs' waits against their theoretical "
        "minimum and GPU use while they waited (--config takes its YAML fields, see "
        "gang/bench/streams.py)",
    )
    stream.add_argument(
        "--workload",
        choices=["gangs", "mixed-stream", "queues"],
        default="gangs",
        help="gangs: --pods in gangs of --gang-sizes (default); mixed-stream: see above; "
        "queues: teams' queues kept backlogged, each queue's GPUs over time (see below)",
    )
    stream.add_argument(
        "--reservations",
        choices=["on", "off", "both"],
        help="the scheduler's reservations (default: on); both: the same workload twice, "
        "on then off, compared side by side",
    )
    stream.add_argument("--duration", type=float, help="seconds during which gangs arrive")
    queues = bench.add_argument_group(
        "queues workload",
        "queues of one queue API kept backlogged, the oldest gang finishing every "
        "--finish-every seconds for --duration seconds (default 90); reports each queue's GPUs "
        "per second and its time-averaged share over the second half beside its fair share, "
        "and exits 1 when a queue misses it by more than 8 GPUs (or a limit is passed); "
        "scenario reclaim: one queue fills the cluster, an idle one of equal weight returns and "
        "nothing finishes, so it gets its half only by reclaim",
    )
    queues.add_argument(
        "--scenario", choices=["weighted", "lend", "limit", "tree", "reclaim"], default="weighted"
    )
    queues.add_argument(
        "--queue-api", choices=["volcano", "kai", "elasticquota"], default="volcano"
    )
    queues.add_argument("--finish-every", type=float, default=1.0, metavar="SECONDS")


def command(args: argparse.Namespace) -> int:
    import yaml
    from pydantic import ValidationError

    from gang.bench.workload import BenchConfig, shaped

    if args.from_snapshot is not None:
        return asyncio.run(_capacity_plan(args))
    if args.workload == "mixed-stream":
        return _mixed_stream(args)
    if args.workload == "queues":
        return _queues(args)
    for flag, value in (("--reservations", args.reservations), ("--duration", args.duration)):
        if value is not None:
            print(f"gang bench: {flag} needs --workload mixed-stream", file=sys.stderr)
            return 2
    if args.placement:
        from gang.bench.placement import placement_ms

        if args.services:
            print(
                "gang bench: --services applies to end-to-end runs, not --placement",
                file=sys.stderr,
            )
            return 2

        sizes = (args.gang_sizes or "64-64").split("-")
        nodes = shaped(args.nodes or "5000")
        rules = args.rules.split(",") if args.rules else []
        if args.topology:
            from gang.bench.placement import topology_ask

            try:
                topology = topology_ask(args.topology)
            except ValueError as err:
                print(f"gang bench: {err}", file=sys.stderr)
                return 2
            asked = placement_ms(nodes, members=int(sizes[-1]), topology=topology)
            plain = placement_ms(nodes, members=int(sizes[-1]))
            print(
                f"placement of a {asked['members']:.0f}-member gang over {asked['nodes']:.0f} "
                f"nodes with {topology.describe()}: median {asked['median_ms']:.1f} ms "
                f"(p95 {asked['p95_ms']:.1f}); without the ask: median {plain['median_ms']:.1f} "
                f"ms; ratio {asked['median_ms'] / plain['median_ms']:.2f}x (same sitting)"
            )
            return 0
        figures = placement_ms(nodes, members=int(sizes[-1]), rules=rules)
        print(
            f"placement of a {figures['members']:.0f}-member gang over {figures['nodes']:.0f} nodes"
            f"{' with ' + args.rules if rules else ''}: median {figures['median_ms']:.1f} ms, "
            f"p95 {figures['p95_ms']:.1f} ms (first, cold caches: {figures['first_ms']:.1f} ms); "
            f"{figures['ratio_to_read']:.1f}x reading the snapshot once "
            f"({figures['read_ms']:.2f} ms, same sitting)"
        )
        if rules:  # the same gang without rules, in the same sitting: the ratio travels
            plain = placement_ms(nodes, members=int(sizes[-1]))
            print(
                f"without rules: median {plain['median_ms']:.1f} ms; "
                f"ratio {figures['median_ms'] / plain['median_ms']:.1f}x"
            )
        return 0
    data: dict[str, object] = yaml.safe_load(args.config.read_text()) if args.config else {}
    for key, value in (
        ("nodes", args.nodes),
        ("pods", args.pods),
        ("arrival", args.arrival),
        ("rate", args.rate),
        ("seed", args.seed),
        ("rules", args.rules.split(",") if args.rules else None),
        ("services", args.services),
        ("preemptor", args.preemptor),
        ("preemptor_gpus", args.preemptor_gpus),
        ("gpus_per_pod", args.gpus_per_pod),
        ("queues", args.queues),
        ("api_latency", args.api_latency),
        ("ceiling_levels", _levels(args.ceiling)),
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
    for result in results:
        if result.shortfall:  # a run that binds less than it should is no result
            print(f"gang bench: FAILED: {result.shortfall}", file=sys.stderr)
            if result.log_tail:
                print("the scheduler's log, last lines:\n" + result.log_tail, file=sys.stderr)
    return 0 if all(r.invariants_hold and not r.shortfall for r in results) else 1


def _levels(spec: str | None) -> list[int] | None:
    """``--ceiling``: None (not given), [] for "none", else the levels (validated later)."""
    if spec is None:
        return None
    if spec.strip().lower() == "none":
        return []
    return [int(x) if x.strip().isdigit() else -1 for x in spec.split(",")]


#: flags of the all-at-once workload that mean nothing for the mixed stream
_NOT_FOR_STREAMS = (
    "pods",
    "gang_sizes",
    "arrival",
    "rate",
    "sweep",
    "kubeconfig",
    "html",
    "placement",
    "rules",
    "services",
    "preemptor",
    "preemptor_gpus",
    "gpus_per_pod",
    "queues",
    "api_latency",
    "ceiling",
)


def _queues(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    import orjson

    from gang.bench.queuerun import report, run_queues, scenario

    try:
        scenario(args.scenario, args.queue_api)
    except ValueError as err:
        print(f"gang bench: {err}", file=sys.stderr)
        return 2
    try:
        result = asyncio.run(
            run_queues(
                args.scenario, args.queue_api, args.duration or 90.0, args.finish_every,
                args.kubeconfig,
            )
        )  # fmt: skip
    except RuntimeError as err:
        print(f"gang bench: {err}", file=sys.stderr)
        return 1
    print(report(result))
    if args.out:
        args.out.write_bytes(orjson.dumps(asdict(result), option=orjson.OPT_INDENT_2))
    over = [
        q for q, v in result.expected.items() if args.scenario == "limit" and result.peak[q] > v
    ]
    if result.worst_miss() > 8 or over:
        print("gang bench: a queue missed its fair share (or passed its limit)", file=sys.stderr)
        return 1
    return 0


def _mixed_stream(args: argparse.Namespace) -> int:
    import yaml
    from pydantic import ValidationError

    from gang.bench.streams import MixedStreamConfig

    given = [f"--{name.replace('_', '-')}" for name in _NOT_FOR_STREAMS if getattr(args, name)]
    if given:
        print(
            f"gang bench: {', '.join(given)} does not apply to --workload mixed-stream",
            file=sys.stderr,
        )
        return 2
    data: dict[str, object] = yaml.safe_load(args.config.read_text()) if args.config else {}
    for key, value in (("nodes", args.nodes), ("seed", args.seed), ("duration", args.duration)):
        if value is not None:
            data[key] = value
    modes = {"on": [True], "off": [False], "both": [True, False]}[args.reservations or "on"]
    try:
        config = MixedStreamConfig.model_validate(data)
    except ValidationError as err:
        print(f"gang bench: invalid benchmark: {err}", file=sys.stderr)
        return 2
    from gang.bench.streamreport import stream_table
    from gang.bench.streamrun import StreamResult, result_json, run_stream

    results: list[StreamResult] = []
    try:
        for on in modes:
            run = config.model_copy(update={"reservations": on})
            if not args.quiet:
                print(f"reservations {'on' if on else 'off'}:", file=sys.stderr, flush=True)
            results.append(run_stream(run, progress=not args.quiet))
    except ValidationError as err:  # a scheduler setting the scheduler would refuse
        print(f"gang bench: invalid scheduler settings: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:  # the simulator or the scheduler did not start
        print(f"gang bench: {err}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("gang bench: interrupted", file=sys.stderr)
        return 130
    print(stream_table(results))
    if args.out:
        args.out.write_bytes(result_json(results))
    return 0 if all(r.ok for r in results) else 1


async def _capacity_plan(args: argparse.Namespace) -> int:
    """``--from-snapshot``: the snapshot's pending gangs (and -f's) on the replayed cluster."""
    from gang import whatif
    from gang.cli.fit import load_manifests
    from gang.models.snapshot import load
    from gang.sim.nodespec import NodeSpecError, parse_pools

    try:
        snapshot = load(args.from_snapshot)
        docs = load_manifests(args.filename)
        pools = parse_pools(args.nodes) if args.nodes else []
    except (OSError, ValueError, NodeSpecError) as err:
        print(f"gang bench: {err}", file=sys.stderr)
        return 2
    loop = asyncio.get_running_loop()
    async with whatif.replay(snapshot, pools=pools) as copy:
        start = loop.time()
        gangs, skipped = copy.create(docs, args.namespace)
        for what in skipped:
            print(f"gang bench: skipped {what}: not served by the cluster copy", file=sys.stderr)
        names = sorted(set(gangs) | copy.pending_gangs())
        answers = await copy.judged(names, 60.0)
        decided = loop.time() - start
    rows = whatif.plan_rows(answers)
    nodes = sum(1 for o in snapshot["items"] if o.get("kind") == "Node") + sum(
        p.count for p in pools
    )
    print(f"capacity plan: {nodes} nodes ({args.nodes or 'no nodes'} added), {len(rows)} gangs, "
          f"decided in {decided:.1f}s")  # fmt: skip
    for row in rows:
        print(f"  {row['gang']}: {row['answer']}{row['detail']}")
    totals: dict[str, int] = {}
    for row in rows:
        totals[row["answer"]] = totals.get(row["answer"], 0) + 1
    print("  " + ", ".join(f"{n} {answer}" for answer, n in sorted(totals.items())))
    waits = sorted(row["wait"] for row in rows if row["wait"] is not None)
    if waits:
        print(f"  expected wait (gangs bound now or reserved): median {waits[len(waits) // 2]:.0f}s, "
              f"max {waits[-1]:.0f}s")  # fmt: skip
    return 0
