"""Benchmark output: a terminal table, and a self-contained HTML page with two SVG charts.

No plotting library: the two charts (bound pods over time, the distribution of
time-to-full-gang) are a few dozen SVG elements, and a page that opens anywhere without
JavaScript or network access is the most useful artifact to attach to a report.
"""

from __future__ import annotations

import html
import statistics

from gang.bench.runner import BenchResult


def _verdict(result: BenchResult) -> str:
    """``ok`` only when the invariants hold and every pod that fits was bound."""
    if not result.invariants_hold:
        return "VIOLATED"
    return "SHORT" if result.shortfall else "ok"


def table(results: list[BenchResult]) -> str:
    head = (
        f"{'nodes':>6} {'pods':>7} {'bound':>7} {'pods/s':>8} {'gangs/s':>8} {'full p50':>9} "
        f"{'p95':>7} {'p99':>7} {'cpu s/1k':>9} {'binding':>8} {'rss MB':>7}  invariants"
    )
    lines = [head]
    for r in results:
        lines.append(
            f"{r.nodes:>6} {r.pods_total:>7} {r.pods_bound:>7} {r.pods_per_second:>8.0f} "
            f"{r.gangs_per_second:>8.1f} {r.time_to_full_gang_p50:>8.2f}s {r.time_to_full_gang_p95:>6.2f}s "
            f"{r.time_to_full_gang_p99:>6.2f}s {r.cpu_seconds_per_1000_pods:>9.2f} "
            f"{r.binding_cpu_seconds_per_1000_pods:>8.2f} "
            f"{r.scheduler_peak_rss_mb:>7.0f}  {_verdict(r)}"
            + (
                ""
                if r.invariants_hold
                else f" ({r.partial_gangs} partial gangs, "
                f"{r.overcommitted_nodes} over-committed nodes, "
                f"{r.pods_on_other_nodes} pods off the benchmark's nodes)"
            )
        )
        if r.ceiling_pods_per_second:
            levels = ", ".join(
                f"{s['pods_per_second']:.0f} at {s['concurrency']:.0f}" for s in r.ceiling_segments
            )
            lines.append(
                f"  ceiling: {r.ceiling_pods_per_second:.0f} pods/s (the same pods bound with no "
                f"decisions, in flight: {levels}; watched as gang's run: "
                f"{r.ceiling_observed} bindings seen); gang: {r.percent_of_ceiling:.0f}% of it"
                + (
                    f" ({100 * r.pods_per_second / r.ceiling_whole_run:.0f}% of the binder's "
                    f"whole run, {r.ceiling_whole_run:.0f} pods/s)"
                    if len(r.ceiling_segments) > 1 and r.ceiling_whole_run
                    else ""
                )
                + (f"; API latency model: {r.api_latency}" if r.api_latency else "")
            )
            if r.ceiling_cpu_us_per_pod:
                workers = (
                    f" + {r.worker_cpu_seconds_per_1000_pods * 1000:.0f} µs in its post workers"
                    if r.worker_cpu_seconds_per_1000_pods
                    else ""
                )
                lines.append(
                    f"  CPU per bound pod: gang {r.binding_cpu_seconds_per_1000_pods * 1000:.0f} µs "
                    f"in its scheduling process{workers} (first to last binding), the ceiling's "
                    f"binder {r.ceiling_cpu_us_per_pod:.0f} µs"
                )
        if r.services != "none":
            lines.append(
                f"  Services: {r.services} (a headless Service per member, as the operator makes)"
            )
        if r.first_binding_seconds:
            lines.append(
                f"  start-up: first binding {r.first_binding_seconds:.2f} s after the scheduler "
                f"started ({r.startup_cpu_seconds:.2f} CPU s: imports, lists, first cycles)"
            )
        if r.startup_steps:
            steps = ", ".join(
                f"{step.replace('_', ' ')} {wall:.2f} ({cpu:.2f})"
                for step, (wall, cpu) in r.startup_steps.items()
            )
            lines.append(
                f"  start-up as the scheduler marked it, s since its start (CPU s): {steps}"
            )
        if r.pods_bound:
            writes = r.status_writes + r.pod_condition_writes + r.events_posted
            lines.append(
                f"  writes besides bindings: {r.status_writes} status patches "
                f"({r.status_backlog} more waiting), "
                f"{r.pod_condition_writes} pod conditions, {r.events_posted} Events "
                f"({writes / r.pods_bound:.2f} per bound pod); bindings in flight at the end: "
                f"{r.bind_concurrency_limit}"
            )
        if r.preemptor_members:
            lines.append(
                f"  preemption: a {r.preemptor_members}-member gang at a higher priority: "
                f"{r.preemptor_bound}/{r.preemptor_members} bound, decision "
                f"{r.preemption_decision_seconds * 1000:.0f} ms, creation to last binding "
                f"{r.preemptor_seconds:.2f} s, {r.preempted_pods} workload pods evicted"
            )
    lines.extend(repeats(results))
    return "\n".join(lines)


def repeats(results: list[BenchResult]) -> list[str]:
    """For a size run more than once with its ceiling (``--sweep 2000,2000,2000``): the median
    ratio and its range, and the median CPU per bound pod. On a server that shares its cores
    the ceiling alone moves up to 2x between runs, so one run's ratio says little."""
    by_size: dict[int, list[BenchResult]] = {}
    for r in results:
        if r.percent_of_ceiling is not None:
            by_size.setdefault(r.nodes, []).append(r)
    lines = []
    for nodes, runs in by_size.items():
        if len(runs) < 2:
            continue
        ratios = [r.percent_of_ceiling or 0.0 for r in runs]
        gang_us = statistics.median(r.binding_cpu_seconds_per_1000_pods * 1000 for r in runs)
        binder_us = statistics.median(r.ceiling_cpu_us_per_pod for r in runs)
        lines.append(
            f"  {nodes} nodes, {len(runs)} runs: gang {statistics.median(ratios):.0f}% of its "
            f"ceiling (median; lowest {min(ratios):.0f}%, highest {max(ratios):.0f}%); CPU per "
            f"bound pod, medians: gang {gang_us:.0f} µs, the ceiling's binder {binder_us:.0f} µs"
        )
    return lines


def _line_chart(points: list[tuple[float, int]], width: int = 640, height: int = 240) -> str:
    if not points:
        return "<p>no bindings</p>"
    max_x = max(p[0] for p in points) or 1.0
    max_y = max(p[1] for p in points) or 1
    path = " ".join(
        f"{40 + x / max_x * (width - 60):.1f},{height - 30 - y / max_y * (height - 50):.1f}"
        for x, y in points
    )
    return (
        f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">'
        f'<polyline fill="none" stroke="#1f77b4" stroke-width="2" points="{path}"/>'
        f'<line x1="40" y1="{height - 30}" x2="{width - 20}" y2="{height - 30}" stroke="#444"/>'
        f'<line x1="40" y1="20" x2="40" y2="{height - 30}" stroke="#444"/>'
        f'<text x="{width / 2}" y="{height - 8}" text-anchor="middle">seconds since the first binding '
        f'(0 to {max_x:.1f})</text><text x="44" y="16">pods bound (max {max_y})</text></svg>'
    )


def _histogram(values: list[float], width: int = 640, height: int = 240, bins: int = 30) -> str:
    if not values:
        return "<p>no complete gangs</p>"
    top = max(values) or 1.0
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int(v / top * bins))] += 1
    peak = max(counts) or 1
    bar = (width - 60) / bins
    rects = "".join(
        f'<rect x="{40 + i * bar:.1f}" y="{height - 30 - c / peak * (height - 50):.1f}" '
        f'width="{bar - 1:.1f}" height="{c / peak * (height - 50):.1f}" fill="#ff7f0e"/>'
        for i, c in enumerate(counts)
    )
    return (
        f'<svg width="{width}" height="{height}" xmlns="http://www.w3.org/2000/svg">{rects}'
        f'<line x1="40" y1="{height - 30}" x2="{width - 20}" y2="{height - 30}" stroke="#444"/>'
        f'<text x="{width / 2}" y="{height - 8}" text-anchor="middle">time to full gang, seconds '
        f'(0 to {top:.2f})</text><text x="44" y="16">gangs (max {peak} per bin)</text></svg>'
    )


def html_report(result: BenchResult, title: str = "gang bench") -> str:
    rows = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>"
        for k, v in (
            ("machine", result.machine),
            ("nodes", result.nodes),
            ("pods bound", f"{result.pods_bound}/{result.pods_total}"),
            ("gangs bound", f"{result.gangs_bound}/{result.gangs_total}"),
            ("pods/s", f"{result.pods_per_second:.0f}"),
            ("gangs/s", f"{result.gangs_per_second:.1f}"),
            (
                "time to full gang p50/p95/p99",
                f"{result.time_to_full_gang_p50:.3f} / {result.time_to_full_gang_p95:.3f} / "
                f"{result.time_to_full_gang_p99:.3f} s",
            ),
            ("scheduler CPU s per 1,000 pods", f"{result.cpu_seconds_per_1000_pods:.2f}"),
            (
                "… of it from the first to the last binding",
                f"{result.binding_cpu_seconds_per_1000_pods:.2f}",
            ),
            ("scheduler peak RSS", f"{result.scheduler_peak_rss_mb:.0f} MB"),
            ("bound", result.shortfall or "every pod that fits"),
            (
                "invariants",
                "hold"
                if result.invariants_hold
                else f"VIOLATED: {result.partial_gangs} partial gangs, "
                f"{result.overcommitted_nodes} over-committed nodes, "
                f"{result.pods_on_other_nodes} pods off the benchmark's nodes",
            ),
        )
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        "<style>body{font-family:sans-serif}th{text-align:left;padding-right:1em}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><table>{rows}</table><h2>Bound pods over time</h2>"
        f"{_line_chart(result.timeline)}<h2>Time to full gang</h2>{_histogram(result.full_gang_seconds)}"
        "</body></html>"
    )
