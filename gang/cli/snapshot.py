"""``gang snapshot``: write a cluster's shape (nodes, pods, groups) to a file for what-if runs
(``gang sim serve --from-snapshot``, ``gang bench --from-snapshot``, ``gang fit``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    snap = sub.add_parser(
        "snapshot",
        help="write the cluster's nodes, pods and groups to a file",
        description="List what placement reads (namespaces, PriorityClasses, nodes, "
        "PodDisruptionBudgets, every served gang API's groups, unfinished pods) into one JSON "
        "file (gzip when it ends in .gz). Read-only.",
    )
    snap.add_argument(
        "--kubeconfig", help="path to a kubeconfig (default: in-cluster, then ~/.kube/config)"
    )
    snap.add_argument("-o", "--output", type=Path, required=True, help="file to write")
    snap.add_argument(
        "--anonymise",
        action="store_true",
        help="rename namespaces, nodes, pods and groups; drop images, commands, env, annotations",
    )


async def command(args: argparse.Namespace) -> int:
    from gang.app.snapshot import anonymise, snapshot_of
    from gang.kube.transport import KubeError
    from gang.models.snapshot import dump

    try:
        snapshot = await snapshot_of(kubeconfig=args.kubeconfig)
    except KubeError as err:
        print(f"gang snapshot: {err}", file=sys.stderr)
        return 1
    if args.anonymise:
        snapshot = anonymise(snapshot)
    dump(snapshot, args.output)
    kinds: dict[str, int] = {}
    for item in snapshot["items"]:
        kinds[item["kind"]] = kinds.get(item["kind"], 0) + 1
    counts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    print(f"gang snapshot: wrote {args.output}: {counts}")
    return 0
