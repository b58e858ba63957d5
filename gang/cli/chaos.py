"""``gang chaos``: seeded fault-injection runs of the real scheduler, their invariants checked."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

#: as ``gang.bench.chaosplan.MODES``; not imported from there, so ``gang run`` (whose CLI
#: imports this module) never loads the simulator
MODES = ("full", "crash", "preempt", "reclaim")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    chaos = sub.add_parser(
        "chaos",
        help="run the scheduler through seeded faults and check its invariants",
        description="Runs `gang run` against an embedded simulator while the apiserver is slow, "
        "throttles, fails, cuts and drops watch events, expires history and restarts, and the "
        "scheduler is SIGKILLed and restarted; then all faults stop and the run must settle with "
        "no partial gang, no over-committed node, no pod bound twice and no fitting gang unbound. "
        "--mode preempt fills the cluster with low-priority gangs, lets high-priority gangs "
        "arrive that fit only by preempting, and SIGKILLs the scheduler at planned evictions: "
        "no victim gang may be left partial and every preemptor that fits once the "
        "low-priority pods are gone must be bound. --mode reclaim fills the cluster from one "
        "queue, brings back an idle queue of equal weight, SIGKILLs the scheduler at planned "
        "evictions and changes the queues mid-run: no victim gang may be left partial, every "
        "returning gang must be bound, and the first queue never left below its fair share.",
    )
    chaos.add_argument("--seed", type=int, default=1, help="first seed (default: %(default)s)")
    chaos.add_argument(
        "--duration", type=float, default=25.0, help="seconds of faults per run (%(default)s)"
    )
    chaos.add_argument("--runs", type=int, default=1, help="runs, with seeds SEED, SEED+1, ...")
    chaos.add_argument(
        "--mode",
        choices=list(MODES),
        default="full",
        help="full: every fault knob; crash: only scheduler SIGKILL + restart; preempt: "
        "SIGKILLs aimed at preemptions (evictions, the wait before the preemptor binds); "
        "reclaim: the same for reclaim across queues, with queue changes mid-run "
        "(default: %(default)s)",
    )
    chaos.add_argument(
        "--settle", type=float, default=30.0, help="longest settle after the faults (seconds)"
    )
    chaos.add_argument(
        "--nodes",
        help="node pools of the simulated cluster (default: 12:gpu=8,cpu=32,memory=128Gi,zones=3; "
        "preempt and reclaim: 8:gpu=8,cpu=32,memory=128Gi)",
    )
    chaos.add_argument(
        "--gangs",
        type=int,
        help="gangs in the workload (default: 24); in preempt mode the high-priority gangs that "
        "arrive (default: 4; the low-priority ones are sized to fill the cluster); in reclaim "
        "mode the returning queue's gangs (default: 4)",
    )
    chaos.add_argument("--log-dir", type=Path, help="keep the scheduler's logs here")
    chaos.add_argument(
        "--log-level",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        default="WARNING",
        help="the scheduler's log level (default: %(default)s)",
    )
    chaos.add_argument("--quiet", action="store_true", help="report only failed runs")


def command(args: argparse.Namespace) -> int:
    from gang.bench.chaos import run_many, summary
    from gang.bench.chaosplan import ChaosConfig, make_plan

    gangs_given = args.gangs is not None
    if args.runs < 1 or args.duration <= 0 or args.settle <= 0 or (gangs_given and args.gangs < 1):
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
        nodes=args.nodes or "",
        gangs=args.gangs or 0,
    )
    try:
        make_plan(config)  # a node spec the mode cannot use fails here, not in a run
    except ValueError as err:
        print(f"gang chaos: {err}", file=sys.stderr)
        return 2
    try:
        results = run_many(
            config, args.runs, args.log_dir, quiet=args.quiet, log_level=args.log_level
        )
    except KeyboardInterrupt:
        print("gang chaos: interrupted", file=sys.stderr)
        return 130
    print(summary(results))
    return 0 if all(r.ok for r in results) else 1
