"""PodDisruptionBudgets as preemption weighs them: how many evictions each budget still allows.

Why this exists: preemption must prefer victims whose eviction keeps every budget, and say when
it cannot. kube-scheduler counts a candidate's violations from the budgets' *status* (the
disruption controller's ``disruptionsAllowed``, and ``disruptedPods`` already granted but not yet
gone), not by asking the API: the Eviction API would answer too, but only by evicting. This
catalog keeps what the informer shows, and :class:`BudgetCounter` replays kube-scheduler's
``filterPodsWithPDBViolation`` for one candidate set of victims.

As in kube-scheduler, a budget whose selector is empty or unparsable selects no pod here (the
Eviction API of policy/v1 reads an empty selector as "every pod"; the scheduler does not).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gang.state.labels import LabelSelector, SelectorError, parse_selector
from gang.state.podinfo import PodInfo


@dataclass(frozen=True, slots=True)
class Budget:
    namespace: str
    name: str
    selector: LabelSelector
    #: ``status.disruptionsAllowed``
    allowed: int
    #: ``status.disruptedPods``: evictions granted, not yet observed gone (they count no more)
    disrupted: frozenset[str]

    def selects(self, pod: PodInfo) -> bool:
        return (
            pod.namespace == self.namespace
            and bool(self.selector.requirements)
            and self.selector.matches(pod.labels)
        )


@dataclass(slots=True)
class DisruptionBudgets:
    #: namespace → budget name → budget
    budgets: dict[str, dict[str, Budget]] = field(default_factory=dict)

    def upsert(self, kind: str, raw: Mapping[str, Any]) -> bool:
        """Apply a PodDisruptionBudget from the informer; True if what it allows changed."""
        meta = raw.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        spec = raw.get("spec")
        status = raw.get("status")
        spec = spec if isinstance(spec, Mapping) else {}
        status = status if isinstance(status, Mapping) else {}
        try:
            selector = parse_selector(spec.get("selector"), "spec.selector")
        except SelectorError:
            selector = LabelSelector()  # selects nothing here (no requirements)
        allowed = status.get("disruptionsAllowed")
        disrupted = status.get("disruptedPods")
        budget = Budget(
            namespace,
            name,
            selector,
            allowed if isinstance(allowed, int) and not isinstance(allowed, bool) else 0,
            frozenset(disrupted) if isinstance(disrupted, Mapping) else frozenset(),
        )
        in_namespace = self.budgets.setdefault(namespace, {})
        changed = in_namespace.get(name) != budget
        in_namespace[name] = budget
        return changed

    def remove(self, kind: str, namespace: str, name: str) -> None:
        in_namespace = self.budgets.get(namespace)
        if in_namespace is not None:
            in_namespace.pop(name, None)
            if not in_namespace:
                del self.budgets[namespace]

    def counter(self) -> BudgetCounter:
        """A fresh count of the evictions every budget allows, for one candidate set."""
        return BudgetCounter(self)

    def violations(self, pods: Iterable[PodInfo]) -> int:
        """How many of ``pods`` would be evicted against a budget, evicted together."""
        counter = self.counter()
        return sum(counter.take(pod) for pod in pods)


class BudgetCounter:
    """kube-scheduler's ``filterPodsWithPDBViolation`` one pod at a time."""

    __slots__ = ("_catalog", "_left")

    def __init__(self, catalog: DisruptionBudgets) -> None:
        self._catalog = catalog
        self._left: dict[tuple[str, str], int] = {}

    def take(self, pod: PodInfo) -> bool:
        """Count ``pod``'s eviction; True if a budget selecting it is now overdrawn."""
        violated = False
        for budget in self._catalog.budgets.get(pod.namespace, {}).values():
            if not budget.selects(pod) or pod.name in budget.disrupted:
                continue
            key = (budget.namespace, budget.name)
            left = self._left.get(key, budget.allowed) - 1
            self._left[key] = left
            violated = violated or left < 0
        return violated
