"""The scheduler's configuration: one validated model, so a bad value stops start-up by name.

Every tunable the scheduler reads lives here with its default and the reason for it; modules
receive the parts they need rather than reading globals. Loading from YAML, flags and the
environment is the entry point's business; this module only says what is valid.
"""

from __future__ import annotations

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DEFAULT_SCHEDULER_NAME = "gang-scheduler"
ZONE_LABEL = "topology.kubernetes.io/zone"


class ScoreWeights(BaseModel):
    """Weights of the node scores (0 disables one). Scores are 0-100 before weighting.

    The default packs (most-allocated, over cpu, memory and whatever else a pod asks for):
    gangs of accelerators suffer most from fragmentation, since a 64-GPU gang needs whole free
    nodes; balanced allocation keeps cpu and memory use even on a node (as kube-scheduler's; a
    profile's ``plugin_args`` may add resources), and gang packing keeps a gang's members in one
    topology domain. The scores of the rules users write (preferred node affinity,
    PreferNoSchedule taints, preferred pod affinity, soft spread) weigh as in kube-scheduler's
    default profile; they only count for pods that state such a rule.
    """

    model_config = ConfigDict(extra="forbid")

    least_allocated: int = Field(default=0, ge=0, le=100)
    most_allocated: int = Field(default=1, ge=0, le=100)
    balanced_allocation: int = Field(default=1, ge=0, le=100)
    gang_packing: int = Field(default=2, ge=0, le=100)
    #: kube-scheduler's default weights for the scores of its placement rules
    node_affinity: int = Field(default=2, ge=0, le=100)
    taint_toleration: int = Field(default=3, ge=0, le=100)
    inter_pod_affinity: int = Field(default=2, ge=0, le=100)
    pod_topology_spread: int = Field(default=2, ge=0, le=100)


class PluginRef(BaseModel):
    """A plugin to enable by name, with a weight for its Score point (1..100)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    weight: int | None = Field(default=None, ge=1, le=100)


class PluginSet(BaseModel):
    """Changes to the default plugins, like a KubeSchedulerConfiguration profile's ``plugins``:
    ``disabled`` names defaults to drop (``"*"``: all of them), ``enabled`` adds plugins (or
    re-weights a default). A plugin is enabled or disabled at every point it implements."""

    model_config = ConfigDict(extra="forbid")

    enabled: list[PluginRef] = Field(default_factory=list)
    disabled: list[str] = Field(default_factory=list)


class ProfileConfig(BaseModel):
    """One scheduling profile: the plugins serving one ``schedulerName``."""

    model_config = ConfigDict(extra="forbid")

    scheduler_name: str = Field(min_length=1)
    plugins: PluginSet = Field(default_factory=PluginSet)
    #: arguments per plugin name, passed to the plugin's factory
    plugin_args: dict[str, dict[str, Any]] = Field(default_factory=dict)


class TopologyLevels(BaseModel):
    """A topology declared in gang's settings (as Kueue's and KAI's ``Topology`` objects say it):
    node label keys, coarse to fine."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    levels: list[str] = Field(min_length=1, max_length=16)

    @field_validator("levels")
    @classmethod
    def _distinct(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value) or not all(value):
            raise ValueError("levels must be distinct, non-empty node label keys")
        return value


def auto_or_number(value: object, low: int, high: int) -> int | Literal["auto"]:
    """``auto`` or a whole number in [low, high] (digits in a string too, as environment
    variables give them), with one clear error for both forms (a union would report one per
    alternative)."""
    if value == "auto":
        return "auto"
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value)
    if number is None or not low <= number <= high:
        raise ValueError(f"must be 'auto' or a whole number from {low} to {high}")
    return number


class SchedulerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: pods whose spec.schedulerName equals this are ours
    scheduler_name: str = Field(default=DEFAULT_SCHEDULER_NAME, min_length=1)
    #: Permit wait for a quorum when the PodGroup sets no scheduleTimeoutSeconds
    #: (Coscheduling's default permit waiting time is 60 s as well)
    default_schedule_timeout_seconds: float = Field(default=60.0, gt=0, le=7 * 24 * 3600)
    #: per-gang exponential backoff after a failed attempt: initial, doubling, capped
    backoff_initial_seconds: float = Field(default=1.0, gt=0)
    backoff_max_seconds: float = Field(default=30.0, gt=0)
    #: a gang that could not be placed is retried at the latest after this long, even if no
    #: cluster event looked relevant (a safety net, like kube-scheduler's 5 min flush)
    unschedulable_flush_seconds: float = Field(default=60.0, gt=0)
    #: the label whose values are the topology domains gang packing keeps a gang inside
    topology_key: str = Field(default=ZONE_LABEL, min_length=1)
    #: topologies for gangs' required/preferred levels, beside Kueue's and KAI's Topology objects
    topologies: list[TopologyLevels] = Field(default_factory=list)
    weights: ScoreWeights = Field(default_factory=ScoreWeights)
    #: binds in flight at once, across all gangs: "auto" follows the server's answers
    #: (gang.binding.adaptive: from 32 doubling to 256 while bindings wait, beyond while
    #: round trips hold or more in flight is answered faster; shrinks when round trips rise
    #: for nothing, not below 256, and on 429s, down to 4), up to ``max_bind_concurrency``; a
    #: number fixes it
    bind_concurrency: int | Literal["auto"] = "auto"
    max_bind_concurrency: int = Field(default=512, ge=4, le=4096)
    #: worker processes that send the bindings, so the scheduler's own core is spent deciding
    #: (gang.kube.postpool): "auto" runs one per 8 usable CPUs (gang.app.cpus), at most 4, and
    #: none below 8; 0 sends them from the scheduler's own process
    post_workers: int | Literal["auto"] = "auto"
    #: client-side rate limit for API writes (token bucket): a backstop; with "auto" bind
    #: concurrency the server's own answers pace the bindings
    qps: float = Field(default=5000.0, gt=0)
    burst: int = Field(default=10000, ge=1)
    #: a separate budget for Events, so a burst of them never delays a binding
    event_qps: float = Field(default=100.0, gt=0)
    event_burst: int = Field(default=200, ge=1)
    #: full relist of every informer, repairing anything a watch missed
    resync_period_seconds: float = Field(default=300.0, gt=0)
    #: server-side timeout of one watch request; the informer reconnects after it
    watch_timeout_seconds: int = Field(default=300, ge=1)
    #: scheduling profiles; empty means one profile with the default plugins for scheduler_name
    profiles: list[ProfileConfig] = Field(default_factory=list)
    #: third-party plugins to load: "package.module:ClassOrFactory" (entry point group
    #: "gang.plugins" is loaded too); their names can then be enabled in profiles
    plugin_paths: list[str] = Field(default_factory=list)
    #: time budget of one plugin call at a synchronous point (seconds; over it the gang's cycle
    #: fails naming the plugin)
    plugin_budget_seconds: float = Field(default=0.5, gt=0)
    #: time budget of one plugin call at an asynchronous point (PreBind, Bind, PostBind)
    async_plugin_budget_seconds: float = Field(default=30.0, gt=0)
    #: time budget of one preemption decision (it runs placement several times)
    preemption_budget_seconds: float = Field(default=5.0, gt=0)
    #: capacity freed by a preemption is held for the preemptor this long at most; if the
    #: victims are not gone by then, the nomination is released and the gang tries again
    nomination_timeout_seconds: float = Field(default=120.0, gt=0, le=3600)
    #: reservation and backfill (gang.scheduling.reservation): a gang that fits the cluster but
    #: not now has the nodes that free up soonest held for it; off, big gangs can starve
    reservations: bool = True
    #: at most this many reservations at a time, holding at most this share of the cluster
    #: (of its scarcest resource: a reservation counts the largest fraction it holds of any)
    max_reservations: int = Field(default=32, ge=1, le=1000)
    reservation_max_share: float = Field(default=0.8, gt=0, le=1)
    #: a reservation whose gang has not placed within this long is dropped (and not renewed
    #: for as long again), so nothing blocks for ever
    max_reservation_seconds: float = Field(default=900.0, gt=0, le=7 * 24 * 3600)

    @field_validator("bind_concurrency", mode="plain")
    @classmethod
    def _bind_concurrency(cls, value: object) -> int | Literal["auto"]:
        return auto_or_number(value, 1, 1024)

    @field_validator("post_workers", mode="plain")
    @classmethod
    def _post_workers(cls, value: object) -> int | Literal["auto"]:
        return auto_or_number(value, 0, 64)

    @model_validator(mode="after")
    def _backoff_order(self) -> Self:
        if self.backoff_max_seconds < self.backoff_initial_seconds:
            raise ValueError("backoff_max_seconds must not be smaller than backoff_initial_seconds")
        names = [p.scheduler_name for p in self.profiles]
        if len(set(names)) != len(names):
            raise ValueError(f"profiles must serve distinct scheduler names, got {names}")
        return self

    def scheduler_names(self) -> list[str]:
        return [p.scheduler_name for p in self.profiles] or [self.scheduler_name]


class LeaderElection(BaseModel):
    """kube-scheduler's leader election flags, with its defaults.

    A standby takes over at most ``lease_duration_seconds`` after the leader stops renewing; the
    leader gives up scheduling if it cannot renew within ``renew_deadline_seconds``.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    lease_name: str = Field(default="gang-scheduler", min_length=1)
    lease_namespace: str = Field(default="gang-system", min_length=1)
    lease_duration_seconds: float = Field(default=15.0, gt=0)
    renew_deadline_seconds: float = Field(default=10.0, gt=0)
    retry_period_seconds: float = Field(default=2.0, gt=0)

    @model_validator(mode="after")
    def _timings(self) -> Self:
        if (
            not self.lease_duration_seconds
            > self.renew_deadline_seconds
            > self.retry_period_seconds
        ):
            raise ValueError(
                "lease_duration_seconds > renew_deadline_seconds > retry_period_seconds must hold"
            )
        return self


class ServerSettings(BaseModel):
    """The HTTP endpoint for /healthz, /readyz, /metrics and /debug/gangs (read-only)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    host: str = "0.0.0.0"
    port: int = Field(default=8080, ge=0, le=65535)


class LoggingSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    format: Literal["text", "json"] = "text"


class Settings(BaseModel):
    """Everything ``gang run`` is configured with: a YAML file, then environment, then flags."""

    model_config = ConfigDict(extra="forbid")

    kubeconfig: str | None = None
    #: the process's event loop: ``auto`` (uvloop where installed), ``uvloop``, ``asyncio``
    event_loop: Literal["auto", "uvloop", "asyncio"] = "auto"
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    leader_election: LeaderElection = Field(default_factory=LeaderElection)
    server: ServerSettings = Field(default_factory=ServerSettings)
    logging: LoggingSettings = Field(default_factory=LoggingSettings)
