"""``gang run``: the scheduler process — settings from file, environment and flags, then leader
election, the scheduler and its status server until SIGTERM."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    run.add_argument(
        "--event-loop",
        choices=["auto", "uvloop", "asyncio"],
        help="event loop (default auto: uvloop where installed)",
    )
    run.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    run.add_argument("--log-format", choices=["text", "json"])


def command(args: argparse.Namespace) -> int:
    from gang.app.config import ConfigError, load_settings
    from gang.app.eventloop import EventLoopError, loop_name, run
    from gang.app.logs import configure_logging
    from gang.app.process import Process
    from gang.app.startup import StartupClock

    startup = StartupClock.of_this_process()

    overrides = {
        "kubeconfig": args.kubeconfig,
        "event_loop": args.event_loop,
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

    startup.mark("imports")

    try:
        settings = load_settings(args.config, overrides)
        check_profiles(settings.scheduler)
        loop = loop_name(settings.event_loop)
    except (ConfigError, ProfileError, EventLoopError) as err:
        print(f"gang run: {err}", file=sys.stderr)
        return 2
    configure_logging(settings.logging.level, settings.logging.format)
    logging.getLogger(__name__).info("event loop: %s", loop)
    return run(Process(settings, tune_gc=True, startup=startup).run(), settings.event_loop)
