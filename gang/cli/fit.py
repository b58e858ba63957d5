"""``gang fit``: would these manifests fit, and how? A dry run that writes nothing.

The answer is what ``gang run`` would do, because it is ``gang run``: the live cluster's
snapshot (or a snapshot file) is replayed in-process, the real scheduler runs on it, the
manifests are created there, and each gang is judged (``gang.whatif``). Per gang: fits now (on
which nodes), fits after preempting (which gangs), fits once running pods finish (when), does
not fit now (why, what would help), never fits (why). Exit code, the worst over the gangs:
0 fits now, 3 after preemption, 4 after running pods finish, 5 not now, 1 never, 2 bad input.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import orjson

Obj = dict[str, Any]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fit = sub.add_parser(
        "fit",
        help="dry run: would these manifests fit the cluster, where, and when",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    fit.add_argument("-f", "--filename", type=Path, action="append", required=True,
                     help="manifest file (YAML, several documents); repeat for more")  # fmt: skip
    fit.add_argument(
        "-n", "--namespace", default="default", help="namespace for objects without one"
    )
    source = fit.add_mutually_exclusive_group()
    source.add_argument(
        "--kubeconfig", help="the live cluster (default: in-cluster, then ~/.kube/config)"
    )
    source.add_argument("--from-snapshot", type=Path, metavar="FILE", help="a gang snapshot file")
    fit.add_argument("--config", type=Path, help="the scheduler's YAML settings (as gang run's)")
    fit.add_argument(
        "--wait", type=float, default=30.0, help="longest wait for the answer (seconds)"
    )
    fit.add_argument("-o", "--output", choices=["text", "json"], default="text")


def load_manifests(paths: list[Path]) -> list[Obj]:
    import yaml

    docs: list[Obj] = []
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            if not isinstance(doc, dict) or "kind" not in doc or "apiVersion" not in doc:
                raise ValueError(f"{path}: a document without apiVersion and kind")
            docs.extend(doc.get("items") or [] if doc["kind"].endswith("List") else [doc])
    return docs


async def command(args: argparse.Namespace) -> int:
    from gang import whatif
    from gang.app.config import ConfigError
    from gang.app.profiles import ProfileError, check_profiles
    from gang.app.snapshot import snapshot_of

    try:
        docs = load_manifests(args.filename)
        config = _config(args.config)
        check_profiles(config)  # a plugin that cannot load is named here, as `gang run` does
        snapshot = await snapshot_of(args.from_snapshot, args.kubeconfig)
    except (OSError, ValueError, ConfigError, ProfileError) as err:
        print(f"gang fit: {err}", file=sys.stderr)
        return whatif.BAD_INPUT
    async with whatif.replay(snapshot, config) as copy:
        await copy.judged([], 5.0)  # the cluster's own pending gangs go first, as they would
        try:
            groups, skipped = copy.create(docs, args.namespace)
        except ValueError as err:
            print(f"gang fit: {err}", file=sys.stderr)
            return whatif.BAD_INPUT
        for what in skipped:
            print(f"gang fit: skipped {what}: not served by the cluster copy", file=sys.stderr)
        if not groups:
            print("gang fit: no gang in these manifests (no group object, no pod)", file=sys.stderr)
            return whatif.BAD_INPUT
        answers = await copy.judged(groups, args.wait)
    codes = []
    out = []
    for name, explained in answers.items():
        verdict, code = whatif.answer_of(explained)
        codes.append(code)
        out.append({"gang": name, "answer": verdict, "exit_code": code, **explained})
    if args.output == "json":
        sys.stdout.write(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode() + "\n")
    else:
        for entry in out:
            print(render(entry))
    return whatif.worst(codes)


def render(entry: Obj) -> str:
    from gang.app.explain import render as render_explained

    lines = [f"{entry['gang']}: {entry['answer'].upper()}"]
    if entry.get("nodes") and entry["answer"] == "fits now":
        lines.append(f"  on nodes: {', '.join(entry['nodes'])}")
    if entry.get("preemption"):
        lines.append(f"  by preempting: {entry['preemption']['evicting']}")
    body = render_explained(entry) if "queue" in entry else f"  {entry.get('summary', '')}"
    lines += body.splitlines()[1:]
    return "\n".join(lines)


def _config(path: Path | None) -> Any:
    from gang.models.settings import SchedulerConfig

    if path is None:
        return SchedulerConfig()
    from gang.app.config import load_settings

    return load_settings(path, {}).scheduler
