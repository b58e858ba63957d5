"""The ``gang`` command: one entry point, a subcommand per job, a module per subcommand.

``gang demo`` shows the product on an embedded simulated cluster; ``gang run`` is the scheduler
(``run``); ``gang sim serve`` runs the Kubernetes API simulator on its own for what-if runs and
for kubectl (``sim_serve``); ``gang extender`` serves gang's filters and scores to kube-scheduler
as a scheduler extender (``extender``); ``gang bench`` and ``gang chaos`` measure and torture it
(``bench``, ``chaos``); ``gang explain`` says why a gang is pending, ``gang fit`` whether
manifests would fit (a dry run), ``gang queues`` how each team's queue stands against its fair
share, ``gang snapshot`` writes a cluster's shape for what-if runs.
Subcommands import what they need lazily so ``gang --help`` stays
instant.
"""

from __future__ import annotations

import os

# numpy's OpenBLAS starts a thread per core at import, and those threads spin through start-up
# (on 16 cores: 2.5-2.9 CPU s of a 0.7-1.0 s import, taken from the API server beside it) for
# matrix products gang never asks for. One thread, unless the user set otherwise; set before
# any subcommand imports numpy (post workers inherit it).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import asyncio
import sys
from collections.abc import Sequence

from gang.cli import bench, chaos, explain, extender, fit, queues, run, sim_serve, snapshot


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gang", description="A gang scheduler for Kubernetes.")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    demo = sub.add_parser("demo", help="run the demo on an embedded simulated cluster")
    demo.add_argument("--nodes", default="16:gpu=8,zones=2", help="node pools for the demo cluster")
    run.add_parser(sub)
    bench.add_parser(sub)
    sim_serve.add_parser(sub)
    extender.add_parser(sub)
    chaos.add_parser(sub)
    explain.add_parser(sub)
    queues.add_parser(sub)
    fit.add_parser(sub)
    snapshot.add_parser(sub)
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
        return bench.command(args)
    if args.command == "run":
        return run.command(args)
    if args.command == "sim":
        return asyncio.run(sim_serve.command(args))
    if args.command == "extender":
        return asyncio.run(extender.command(args))
    if args.command == "chaos":
        return chaos.command(args)
    if args.command == "explain":
        return asyncio.run(explain.command(args))
    if args.command == "queues":
        return asyncio.run(queues.command(args))
    if args.command == "fit":
        return asyncio.run(fit.command(args))
    if args.command == "snapshot":
        return asyncio.run(snapshot.command(args))
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
