"""Prometheus metrics, read from the scheduler's own counters at scrape time.

The scheduling code keeps plain integers and a histogram in ``Stats`` (no metrics library on the
hot path); this collector turns them into metric families when Prometheus scrapes. A process may
run several scheduler instances over its life (one per leadership term), so the collector asks
a provider for the current one; counters restart with a new term, which Prometheus handles as a
counter reset.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from gang.app import gcpolicy
from gang.app.scheduler import GangScheduler
from gang.app.startup import StartupClock


class SchedulerCollector(Collector):
    def __init__(
        self,
        current: Callable[[], GangScheduler | None],
        is_leader: Callable[[], bool],
        startup: StartupClock | None = None,
    ) -> None:
        self.current = current
        self.is_leader = is_leader
        self.startup = startup

    def collect(self) -> Iterator[Metric]:
        leader = GaugeMetricFamily("gang_leader", "1 if this replica holds the lease and schedules")
        leader.add_metric([], 1.0 if self.is_leader() else 0.0)
        yield leader
        if self.startup is not None and self.startup.marks:
            startup = GaugeMetricFamily(
                "gang_startup_seconds",
                "Seconds from the process's start to each start-up step, wall or CPU",
                labels=["step", "clock"],
            )
            for step, (wall, cpu) in self.startup.marks.items():
                startup.add_metric([step, "wall"], wall)
                startup.add_metric([step, "cpu"], cpu)
            yield startup
        scheduler = self.current()
        if scheduler is None or not scheduler.ready.is_set():
            return
        stats = scheduler.stats
        attempts = CounterMetricFamily(
            "gang_scheduling_attempts", "Scheduling cycles by result", labels=["result"]
        )
        for result in ("scheduled", "unschedulable", "backoff"):
            attempts.add_metric([result], stats.attempts.get(result, 0))
        yield attempts
        yield CounterMetricFamily(
            "gang_pods_bound", "Pods bound by this scheduler", value=scheduler.binder.bound
        )
        yield CounterMetricFamily(
            "gang_bind_errors",
            "Failed binding requests (retried or not)",
            value=scheduler.binder.errors,
        )
        reporter = scheduler.reporter
        for name, text, value in (
            ("gang_events_posted", "Events written", reporter.posted_events),
            ("gang_events_dropped", "Events dropped (queue full)", reporter.dropped_events),
            ("gang_status_writes", "PodGroup and queue status patches", reporter.status_writes),
            (
                "gang_pod_condition_writes",
                "PodScheduled=False conditions written on pods that could not be placed",
                reporter.pod_notes,
            ),
        ):
            yield CounterMetricFamily(name, text, value=value)
        yield GaugeMetricFamily(
            "gang_status_backlog",
            "Group status changes not written yet (written behind bindings; a burst leaves one "
            "per gang)",
            value=reporter.status_backlog(),
        )
        yield CounterMetricFamily(
            "gang_permit_timeouts",
            "Quorum waits that timed out and released",
            value=scheduler.cycle.permit_timeouts,
        )
        yield CounterMetricFamily(
            "gang_gangs_completed", "Gangs whose quorum was bound", value=stats.gangs_completed
        )
        histogram = stats.time_to_full_gang
        yield HistogramMetricFamily(
            "gang_time_to_full_gang_seconds",
            "Seconds from a gang's first waiting member to its whole quorum being bound",
            buckets=histogram.cumulative(),
            sum_value=histogram.total,
        )
        cycle = scheduler.cycle
        yield CounterMetricFamily(
            "gang_preemptions",
            "Preemptions decided (each evicts whole gangs, or members above minMember)",
            value=cycle.preemptions,
        )
        yield CounterMetricFamily(
            "gang_preempted_pods", "Pods chosen as preemption victims", value=cycle.preempted_pods
        )
        yield CounterMetricFamily(
            "gang_reclaims",
            "Reclaims decided (preemptions across queues, for a queue below its fair share)",
            value=cycle.reclaims,
        )
        for name, text, counts in (
            ("gang_reclaimed_gangs", "Gangs reclaimed from the queue", cycle.reclaimed_gangs),
            ("gang_reclaimed_pods", "Pods reclaimed from the queue", cycle.reclaimed_pods),
        ):
            family = CounterMetricFamily(name, text, labels=["queue"])
            for queue, count in sorted(counts.items()):
                family.add_metric([queue], count)
            yield family
        decisions = cycle.preemption_decisions
        yield HistogramMetricFamily(
            "gang_preemption_decision_seconds",
            "Seconds one preemption decision took (victim search on the snapshot)",
            buckets=decisions.cumulative(),
            sum_value=decisions.total,
        )
        book = scheduler.state.reservations
        yield GaugeMetricFamily(
            "gang_reservations",
            "Reservations in force (capacity held for gangs that fit the cluster but not now)",
            value=len(book),
        )
        yield GaugeMetricFamily(
            "gang_reserved_nodes",
            "Nodes holding capacity for a reservation",
            value=len(book.held_nodes()),
        )
        outcomes = CounterMetricFamily(
            "gang_reservations_ended",
            "Reservations made, and ended other than by their gang placing",
            labels=["outcome"],
        )
        outcomes.add_metric(["made"], book.made)
        outcomes.add_metric(["expired"], book.expired)
        outcomes.add_metric(["yielded"], book.yielded)
        yield outcomes
        yield CounterMetricFamily(
            "gang_reservations_moved",
            "Reservations whose start slipped and that moved to nodes freeing sooner",
            value=book.moved,
        )
        yield CounterMetricFamily(
            "gang_backfills",
            "Gangs placed on capacity held for a reservation (their run time ends before it)",
            value=book.backfills,
        )
        yield HistogramMetricFamily(
            "gang_reservation_wait_seconds",
            "Seconds from a reservation being made to its gang placing",
            buckets=book.waits.cumulative(),
            sum_value=book.waits.total,
        )
        waiting = GaugeMetricFamily(
            "gang_gangs_waiting", "Gangs with members waiting for placement or quorum"
        )
        waiting.add_metric(
            [], sum(1 for g in scheduler.state.gangs.values() if g.reserved or g.any_pending())
        )
        yield waiting
        depth = GaugeMetricFamily(
            "gang_queue_depth", "Gangs in the scheduling queue", labels=["queue"]
        )
        for name, count in scheduler.queue.counts().items():
            depth.add_metric([name], count)
        yield depth
        yield GaugeMetricFamily(
            "gang_binds_in_flight", "Binding requests in flight", value=scheduler.binder.in_flight
        )
        yield GaugeMetricFamily(
            "gang_bind_concurrency_limit",
            "Bindings allowed in flight now (follows the API server's answers when 'auto')",
            value=int(scheduler.binder.slots.limit),
        )
        pool = scheduler.kube.post_pool
        yield GaugeMetricFamily(
            "gang_post_workers",
            "Worker processes sending bindings now (0: the scheduler's own process sends them)",
            value=pool.running if pool is not None else 0,
        )
        yield CounterMetricFamily(
            "gang_post_worker_starts",
            "Worker processes started to send bindings (more than configured: some were replaced)",
            value=pool.started_workers if pool is not None else 0,
        )
        yield GaugeMetricFamily(
            "gang_gc_frozen_objects",
            "Objects moved out of the garbage collector's passes once the informers synced "
            "(0 where the process does not tune its collector: see gang.app.gcpolicy)",
            value=gcpolicy.frozen_objects(),
        )
        yield from informer_metrics(scheduler)
        yield from queue_metrics(scheduler)


def queue_metrics(scheduler: GangScheduler) -> Iterator[Metric]:
    """Per queue and resource: quota, limit, fair share, allocated, demand; per queue: its
    standing (dominant share: allocated / fair share) and gangs waiting. Only with queues."""
    ledger = scheduler.state.ledger
    if not ledger.in_use():
        return
    labels = ["queue", "api", "resource"]
    amounts = {
        name: GaugeMetricFamily(f"gang_queue_{name}", text, labels=labels)
        for name, text in (
            ("quota", "What the queue is entitled to (lent while idle), scheduler units"),
            ("limit", "The most the queue may hold (absent: unlimited), scheduler units"),
            ("fair_share", "The queue's fair share now, scheduler units (cpu: millicores)"),
            ("allocated", "What the queue's gangs hold now (bound, reserved, nominated)"),
            ("demand", "What the queue holds plus what its waiting gangs ask for"),
        )
    }
    standing = GaugeMetricFamily(
        "gang_queue_standing",
        "Dominant share: allocated / fair share, the largest over resources (<1: below it)",
        labels=["queue", "api"],
    )
    pending = GaugeMetricFamily(
        "gang_queue_pending_gangs",
        "Gangs of the queue waiting for placement",
        labels=["queue", "api"],
    )
    waiting = scheduler.pending_by_queue()
    for view in ledger.views(waiting):
        for name, values in (
            ("quota", view.quota),
            ("limit", view.limit),
            ("fair_share", view.fair),
            ("allocated", view.held),
            ("demand", view.demand),
        ):
            for resource, value in sorted(values.items()):
                amounts[name].add_metric([view.name, view.api, resource], float(value))
        if view.standing != float("inf"):
            standing.add_metric([view.name, view.api], view.standing)
        pending.add_metric([view.name, view.api], view.pending_gangs)
    yield from amounts.values()
    yield standing
    yield pending


def informer_metrics(scheduler: GangScheduler) -> Iterator[Metric]:
    """Per watched kind: events applied, relists, resumed watches, and how long the server
    has been silent about it (a silent kind whose objects change means a stuck watch)."""
    families = (
        CounterMetricFamily(
            "gang_informer_events", "Watch events applied, per kind", labels=["kind"]
        ),
        CounterMetricFamily(
            "gang_informer_relists", "Full lists of a kind (start, resync, 410)", labels=["kind"]
        ),
        CounterMetricFamily(
            "gang_informer_rewatches",
            "Watches resumed from the last resourceVersion after a failure",
            labels=["kind"],
        ),
        GaugeMetricFamily(
            "gang_informer_silence_seconds",
            "Seconds since the last list, watch event or BOOKMARK of a kind",
            labels=["kind"],
        ),
    )
    events, relists, rewatches, silence = families
    for informer in scheduler.informers:
        kind = [informer.kind.name]
        events.add_metric(kind, informer.events)
        relists.add_metric(kind, informer.relists)
        rewatches.add_metric(kind, informer.rewatches)
        silence.add_metric(kind, informer.silence())
    yield from families


def make_registry(
    current: Callable[[], GangScheduler | None],
    is_leader: Callable[[], bool],
    startup: StartupClock | None = None,
) -> CollectorRegistry:
    registry = CollectorRegistry()
    registry.register(SchedulerCollector(current, is_leader, startup))
    return registry
