"""``gang queues`` (and ``kubectl gang queues``): every queue, its share and who waits, as a table.

Teams on a shared cluster ask one question first: is my queue getting its share? The table
answers it the way ``vcctl queue list`` does, for every queue API at once: each queue's quota,
limit, fair share now, what it holds and asks for, its standing (held / fair share of its
dominant resource: below 1 it is owed capacity, above 1 it borrows), the gangs waiting in it,
and what is wrong with it when it cannot be used. The answer is the running scheduler's
(``/debug/queues``), through ``--scheduler URL`` or the API server's service proxy, as for
``gang explain``.

Exit code: 0 printed, 1 no scheduler answered.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from gang.cli.explain import from_url, through_proxy

COLUMNS = ("QUEUE", "API", "PARENT", "WEIGHT", "QUOTA", "LIMIT", "FAIR", "ALLOCATED", "STANDING")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    queues = sub.add_parser(
        "queues",
        help="every queue: quota, fair share, allocated, pending gangs",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    queues.add_argument("--scheduler", metavar="URL", help="the scheduler's HTTP endpoint")
    queues.add_argument("--kubeconfig", help="path to a kubeconfig (default: ~/.kube/config)")
    queues.add_argument("-o", "--output", choices=["text", "json"], default="text")


async def command(args: argparse.Namespace) -> int:
    path = "/debug/queues"
    try:
        if args.scheduler:
            answer: Any = await from_url(args.scheduler.rstrip("/") + path)
        else:
            answer = await through_proxy(args.kubeconfig, path)
    except (OSError, ValueError, LookupError) as err:
        print(f"gang queues: {err}", file=sys.stderr)
        return 1
    if answer is None or isinstance(answer, dict):
        why = answer.get("error") if isinstance(answer, dict) else "no scheduler answered"
        print(f"gang queues: {why}", file=sys.stderr)
        return 1
    if args.output == "json":
        sys.stdout.write(orjson.dumps(answer, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        print(render(answer))
    return 0


def render(rows: Sequence[Mapping[str, Any]]) -> str:
    """The queues as a table; each problem on a line of its own below it."""
    table = [COLUMNS]
    notes: list[str] = []
    for row in rows:
        standing = row["standing"]
        table.append(
            (
                row["name"],
                row["api"],
                row["parent"] or "-",
                f"{row['weight']:g}",
                _amounts(row["quota"]),
                _amounts(row["limit"]),
                _amounts(row["fair_share"]),
                _amounts(row["allocated"]),
                "-" if standing is None else f"{standing:.2f}",
            )
        )
        state = "" if row["open"] else " (closed)"
        pending = f"{row['pending_gangs']} gang(s) waiting" if row["pending_gangs"] else ""
        if row["problem"]:
            notes.append(f"{row['name']} ({row['api']}): INVALID: {row['problem']}")
        elif pending or state:
            notes.append(f"{row['name']} ({row['api']}): {pending}{state}".rstrip(": "))
    widths = [max(len(str(line[i])) for line in table) for i in range(len(COLUMNS))]
    lines = [
        "  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
        for line in table
    ]
    return "\n".join([*lines, *notes])


def _amounts(values: Mapping[str, str]) -> str:
    """``gpu 32, cpu 8`` — GPUs first, as a GPU cluster's users read it."""
    if not values:
        return "-"
    order = sorted(values, key=lambda r: (not r.endswith("gpu"), r))
    return ", ".join(f"{'gpu' if r.endswith('/gpu') else r} {values[r]}" for r in order)
