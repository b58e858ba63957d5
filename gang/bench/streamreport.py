"""The mixed-stream benchmark's terminal output: one column per run, one row per figure.

Reservations on and off are the same seeded workload, so the figures only mean something side
by side; a column per run keeps them next to each other, and the per-gang table lines the big
gangs up by name (the same gangs, created at the same planned times, in every run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from gang.bench.streamrun import StreamResult
from gang.bench.streamstats import BigGangFigures


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _share(value: float) -> str:
    return f"{value * 100:.1f}%"


Row = tuple[str, Callable[[StreamResult], str]]

ROWS: Sequence[Row] = (
    ("big gangs bound", lambda r: f"{r.figures.big_bound}/{r.figures.big_created}"),
    (
        "big wait p50 / p95 / max (s)",
        lambda r: " / ".join(
            _seconds(v)
            for v in (r.figures.big_wait_p50, r.figures.big_wait_p95, r.figures.big_wait_max)
        ),
    ),
    (
        "big min wait p50 / max (s)",
        lambda r: (
            f"{_seconds(r.figures.big_min_wait_p50)} / {_seconds(r.figures.big_min_wait_max)}"
        ),
    ),
    (
        "wait / min wait p50 / max",
        lambda r: f"{_ratio(r.figures.big_ratio_p50)} / {_ratio(r.figures.big_ratio_max)}",
    ),
    (
        "big bound on target",
        lambda r: f"{r.figures.big_within_target}/{r.figures.big_created}",
    ),
    ("GPU use while big gangs waited", lambda r: _share(r.figures.utilisation_while_waiting)),
    ("GPU use overall", lambda r: _share(r.figures.utilisation_overall)),
    (
        "small wait p50 / p95 (s)",
        lambda r: f"{_seconds(r.figures.small_wait_p50)} / {_seconds(r.figures.small_wait_p95)}",
    ),
    ("small gangs bound", lambda r: f"{r.figures.small_bound}/{r.figures.small_created}"),
    (
        "reservations peak / backfills",
        lambda r: f"{r.reservations_peak:.0f} / {r.backfills:.0f}",
    ),
    (
        "reservation wait mean (s)",
        lambda r: f"{r.reservation_wait_mean:.1f} (of {r.reservation_waits:.0f})",
    ),
    ("run seconds", lambda r: f"{r.seconds:.1f}"),
    ("creation lag max (s)", lambda r: f"{r.creation_lag_max:.2f}"),
    ("invariants", lambda r: _invariants(r)),
)


def _invariants(r: StreamResult) -> str:
    if r.scheduler_exit is not None:
        return f"scheduler exited ({r.scheduler_exit})"
    if r.invariants_hold:
        return "ok"
    return (
        f"VIOLATED: {r.partial_gangs} partial, {r.overcommitted_nodes} over-committed at the end, "
        f"{len(r.figures.overcommitted_during_run)} during"
    )


def stream_table(results: Sequence[StreamResult]) -> str:
    """The figures of each run in a column, the big gangs one by one, and the legend."""
    if not results:
        return "no runs"
    first = results[0]
    label = 32
    width = max(22, *(len(fn(r)) + 2 for _, fn in ROWS for r in results))
    lines = [
        f"mixed-stream: {first.nodes} nodes, {first.gpus} GPUs, {first.gangs_planned} gangs over "
        f"{first.duration:.0f} s, seed {first.seed}",
        f"{'':<{label}}" + "".join(f"{'reservations ' + r.reservations:>{width}}" for r in results),
    ]
    for title, fn in ROWS:
        lines.append(f"{title:<{label}}" + "".join(f"{fn(r):>{width}}" for r in results))
    lines.append("")
    lines.append(
        f"{'big gang':<14}{'created':>9}"
        + "".join(f"{'wait/min (' + r.reservations + ')':>22}" for r in results)
    )
    by_name = [{g.name: g for g in r.figures.big_gangs} for r in results]
    for gang in first.figures.big_gangs:
        cells = [_gang_cell(runs.get(gang.name)) for runs in by_name]
        lines.append(f"{gang.name:<14}{gang.created:>8.1f}s" + "".join(f"{c:>22}" for c in cells))
    lines.append("")
    lines.append(
        "min wait: the wait on a cluster serving only the gangs created earlier, each holding "
        "its actual nodes from the gang's arrival (or its own binding) until it finished;"
    )
    lines.append("  [n]: gangs created earlier and still waiting for their nodes at that instant")
    targets = first.targets
    lines.append(
        f"on target: bound within max({targets.factor:g} x min wait, min wait + "
        f"{targets.allowance:g} s); ratios only where the min wait is >= {targets.ratio_floor:g} s"
    )
    for r in results:
        if r.reservations_setting != "default":
            lines.append(f"reservations {r.reservations}: {r.reservations_setting}")
    lines.append(f"machine: {first.machine}")
    return "\n".join(lines)


def _gang_cell(gang: BigGangFigures | None) -> str:
    if gang is None:
        return "-"
    wait = f"{gang.wait:.1f}" + ("" if gang.bound else " (unbound)")
    ahead = f" [{gang.ahead_waiting}]" if gang.ahead_waiting else ""
    return f"{wait} / {_seconds(gang.min_wait)}{ahead}"
