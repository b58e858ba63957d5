"""Profiles from configuration: which plugins serve which schedulerName, built and checked once.

Like a KubeSchedulerConfiguration, a profile starts from the default plugins (weights from the
``weights`` setting), drops what ``disabled`` names (``"*"``: every default), and adds what
``enabled`` names — built-ins, or third-party plugins loaded from ``plugin_paths``
(``package.module:Name``) or the ``gang.plugins`` entry point group. Each plugin is placed at
every extension point it implements. A profile that cannot work (no QueueSort or two, no Bind, an
unknown name, a factory that fails) stops start-up with a message naming it.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from gang.binding.binder import DefaultBinder
from gang.models.settings import ProfileConfig, SchedulerConfig
from gang.scheduling import framework as fw
from gang.scheduling.dra.plugin import DynamicResources
from gang.scheduling.interpodaffinity import InterPodAffinity
from gang.scheduling.plugins import (
    BALANCED_RESOURCES,
    BUILTIN,
    BalancedAllocation,
    GangPermit,
    MinResources,
)
from gang.scheduling.preemption import DEFAULT_MAX_TRIALS, GangPreemption
from gang.scheduling.topologyspread import PodTopologySpread, parse_default_constraints
from gang.scheduling.volumes import VolumeBinding

ENTRY_POINT_GROUP = "gang.plugins"
Factory = Callable[..., Any]


class ProfileError(Exception):
    pass


def _builtin_factories() -> dict[str, Factory]:
    factories: dict[str, Factory] = {name: cls for name, cls in BUILTIN.items()}
    factories["MinResources"] = lambda args, ctx: MinResources(ctx.index)
    factories["GangPermit"] = lambda args, ctx: GangPermit(
        float(args.get("default_timeout", ctx.config.default_schedule_timeout_seconds))
    )
    factories["DefaultBinder"] = lambda args, ctx: DefaultBinder(ctx.kube)
    factories["InterPodAffinity"] = _inter_pod_affinity
    factories["VolumeBinding"] = lambda args, ctx: VolumeBinding(
        ctx.kube, ctx.cache, float(args.get("bind_timeout_seconds", 600))
    )
    factories["DynamicResources"] = lambda args, ctx: DynamicResources(ctx.kube, ctx.cache)
    factories["PodTopologySpread"] = _topology_spread
    factories["GangPreemption"] = _gang_preemption
    factories["BalancedAllocation"] = _balanced_allocation
    return factories


def _integer(value: Any, name: str, low: int, high: int) -> int:
    """A plugin argument that must be an integer in ``low..high`` (a bool is not one)."""
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return value


def _balanced_allocation(args: dict[str, Any], ctx: fw.PluginContext) -> BalancedAllocation:
    """kube-scheduler's NodeResourcesBalancedAllocationArgs: ``resources``, a list of
    ``{name, weight}`` (the weight is checked as there, and unused there too: every resource
    counts alike in a standard deviation)."""
    specs = args.get("resources", [{"name": name, "weight": 1} for name in BALANCED_RESOURCES])
    if not isinstance(specs, list) or not specs:
        raise ValueError("resources must be a non-empty list of {name, weight}")
    names: list[str] = []
    for spec in specs:
        name = spec.get("name") if isinstance(spec, dict) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"each of resources needs a name, got {spec!r}")
        unknown = sorted(set(spec) - {"name", "weight"})
        if unknown:
            raise ValueError(f"resources[{name}] has unknown field(s) {unknown}")
        _integer(spec.get("weight", 1), f"resources[{name}].weight", 1, 100)
        if name in names:
            raise ValueError(f"resources names {name!r} twice")
        names.append(name)
    return BalancedAllocation(names)


def _inter_pod_affinity(args: dict[str, Any], ctx: fw.PluginContext) -> InterPodAffinity:
    weight = _integer(args.get("hard_pod_affinity_weight", 1), "hard_pod_affinity_weight", 0, 100)
    ignore = args.get("ignore_preferred_terms_of_existing_pods", False)
    if not isinstance(ignore, bool):
        raise ValueError("ignore_preferred_terms_of_existing_pods must be true or false")
    return InterPodAffinity(weight, ignore)


def _topology_spread(args: dict[str, Any], ctx: fw.PluginContext) -> PodTopologySpread:
    kind = args.get("defaulting_type", "System")
    constraints = parse_default_constraints(args.get("default_constraints"))
    if kind not in ("System", "List"):
        raise ValueError(f"defaulting_type must be System or List, got {kind!r}")
    if kind == "System" and constraints:
        raise ValueError("default_constraints need defaulting_type: List")
    return PodTopologySpread(constraints, kind)


def _gang_preemption(args: dict[str, Any], ctx: fw.PluginContext) -> GangPreemption:
    trials = _integer(args.get("max_trials", DEFAULT_MAX_TRIALS), "max_trials", 1, 10_000)
    return GangPreemption(trials)


def load_object(path: str) -> Any:
    """``package.module:Name`` (or ``package.module.Name``) → the object."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ProfileError(f"plugin path {path!r} must look like 'package.module:Name'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ProfileError(f"cannot import plugin module {module_name!r}: {err}") from None
    try:
        return getattr(module, attr)
    except AttributeError:
        raise ProfileError(f"module {module_name!r} has no {attr!r}") from None


def plugin_factories(config: SchedulerConfig) -> dict[str, Factory]:
    """Built-ins, then entry points, then plugin_paths (later ones may not shadow built-ins)."""
    factories = _builtin_factories()
    extra: list[tuple[str, Any]] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        extra.append((ep.name, ep.load()))
    for path in config.plugin_paths:
        obj = load_object(path)
        extra.append((_name_of(obj), obj))
    for name, obj in extra:
        if name in factories and factories[name] is not obj:
            raise ProfileError(f"plugin name {name!r} is already taken")
        factories[name] = obj
    return factories


def _name_of(obj: Any) -> str:
    name = getattr(obj, "name", None)
    return name if isinstance(name, str) else str(getattr(obj, "__name__", obj))


def _instantiate(name: str, factory: Factory, args: dict[str, Any], ctx: fw.PluginContext) -> Any:
    try:
        params = [
            p
            for p in inspect.signature(factory).parameters.values()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty
        ]
    except (TypeError, ValueError):
        params = []
    try:
        if len(params) >= 2:
            return factory(args, ctx)
        if len(params) == 1:
            return factory(args)
        return factory()
    except Exception as err:
        raise ProfileError(
            f"plugin {name}: cannot be created: {type(err).__name__}: {err}"
        ) from None


def default_plugins(config: SchedulerConfig) -> list[tuple[str, int]]:
    """The default profile's plugins in order, with Score weights (0 = not enabled)."""
    w = config.weights
    return [
        ("PrioritySort", 0),
        ("PodGroupReady", 0),
        ("UnsupportedFields", 0),
        ("MinResources", 0),
        ("NodeUnschedulable", 0),
        ("TaintToleration", w.taint_toleration),
        ("NodeAffinity", w.node_affinity),
        ("NodePorts", 0),
        ("NodeResourcesFit", 0),
        ("NodeVolumeLimits", 0),
        ("VolumeBinding", 0),
        ("VolumeZone", 0),
        ("PodTopologySpread", w.pod_topology_spread),
        ("InterPodAffinity", w.inter_pod_affinity),
        ("DynamicResources", 0),
        ("GangPreemption", 0),
        ("LeastAllocated", w.least_allocated),
        ("MostAllocated", w.most_allocated),
        ("BalancedAllocation", w.balanced_allocation),
        ("GangPacking", w.gang_packing),
        ("GangPermit", 0),
        ("DefaultBinder", 0),
    ]


_SCORES = {"LeastAllocated", "MostAllocated", "BalancedAllocation", "GangPacking"}
#: where a plugin goes, by the protocol it implements (Score is weighted, so handled apart)
_POINTS: tuple[tuple[type, str], ...] = (
    (fw.PreFilterPlugin, "pre_filters"),
    (fw.StaticFilterPlugin, "static_filters"),
    (fw.NodeFilterPlugin, "node_filters"),
    (fw.PostFilterPlugin, "post_filters"),
    (fw.PreemptionPlugin, "preemptions"),
    (fw.PreScorePlugin, "pre_scores"),
    (fw.ReservePlugin, "reserves"),
    (fw.PermitPlugin, "permits"),
    (fw.PreBindPlugin, "pre_binds"),
    (fw.BindPlugin, "binds"),
    (fw.PostBindPlugin, "post_binds"),
)


def build_profile(
    profile: ProfileConfig,
    config: SchedulerConfig,
    ctx: fw.PluginContext,
    factories: dict[str, Factory],
) -> fw.Profile:
    chosen = [(n, wt) for n, wt in default_plugins(config) if n not in _SCORES or wt > 0]
    disabled = set(profile.plugins.disabled)
    if "*" in disabled:
        chosen = []
    chosen = [(n, wt) for n, wt in chosen if n not in disabled]
    for ref in profile.plugins.enabled:
        weight = ref.weight or 1
        chosen = [(n, weight if n == ref.name else wt) for n, wt in chosen]
        if ref.name not in (n for n, _ in chosen):
            chosen.append((ref.name, weight))
    unknown = [n for n, _ in chosen if n not in factories]
    if unknown:
        raise ProfileError(
            f"profile {profile.scheduler_name}: unknown plugin(s) {unknown}; "
            f"known: {sorted(factories)}"
        )
    plugins = [
        (_instantiate(n, factories[n], profile.plugin_args.get(n, {}), ctx), wt) for n, wt in chosen
    ]
    sorts = [p for p, _ in plugins if isinstance(p, fw.QueueSortPlugin)]
    if len(sorts) != 1:
        raise ProfileError(
            f"profile {profile.scheduler_name}: needs exactly one QueueSort plugin, "
            f"has {[s.name for s in sorts]}"
        )
    result = fw.Profile(
        scheduler_name=profile.scheduler_name,
        queue_sort=sorts[0],
        budgets=fw.Budgets(
            config.plugin_budget_seconds,
            config.async_plugin_budget_seconds,
            config.preemption_budget_seconds,
        ),
    )
    for plugin, weight in plugins:
        for protocol, attribute in _POINTS:
            if isinstance(plugin, protocol):
                getattr(result, attribute).append(plugin)
        if isinstance(plugin, fw.ScorePlugin) and weight > 0:
            result.scores.append((plugin, weight))
    if not result.binds:
        raise ProfileError(
            f"profile {profile.scheduler_name}: needs a Bind plugin (e.g. DefaultBinder)"
        )
    return result


def build_profiles(config: SchedulerConfig, ctx: fw.PluginContext) -> dict[str, fw.Profile]:
    factories = plugin_factories(config)
    profiles = config.profiles or [ProfileConfig(scheduler_name=config.scheduler_name)]
    built = {p.scheduler_name: build_profile(p, config, ctx, factories) for p in profiles}
    sorts = {p.queue_sort.name for p in built.values()}
    if len(sorts) > 1:  # one queue orders every gang, so its order must be one order
        raise ProfileError(f"all profiles must use the same QueueSort plugin, got {sorted(sorts)}")
    return built


def check_profiles(config: SchedulerConfig) -> None:
    """Build every profile once without a cluster, so a bad one stops start-up early."""
    from gang.state.resources import ResourceIndex

    build_profiles(config, fw.PluginContext(config, ResourceIndex(), None))
