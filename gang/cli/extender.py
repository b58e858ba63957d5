"""``gang extender``: gang's Filter and Score plugins served to kube-scheduler over its extender
protocol; refuses an unauthenticated ``/bind``."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import signal
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


async def command(args: argparse.Namespace) -> int:
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
