"""Which Services and controllers select a pod: kube-scheduler's default spreading selector.

Why this exists: kube-scheduler spreads a pod that states no topology spread constraint of its
own by default constraints (the ``System`` defaults: hostname skew 3, zone skew 5, ScheduleAnyway)
whose selector is not written anywhere: it is the union of the selectors of the Services that
select the pod and of its controlling ReplicaSet, StatefulSet or ReplicationController
(``helper.DefaultSelector``). A pod nobody selects gets no default constraint. The informers
feed this catalog so the spread plugin can derive the same selector.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gang.state.labels import NOTHING, LabelSelector, Requirement, SelectorError, parse_selector

Key = tuple[str, str]
#: controller kinds whose selector joins the default selector
CONTROLLER_KINDS: Final = ("ReplicaSet", "StatefulSet", "ReplicationController")
#: default selectors remembered at most (a label set each; emptied when full)
MAX_ANSWERS: Final = 4096


@dataclass(slots=True)
class SelectorCatalog:
    #: namespace → Service name → its ``spec.selector`` (Services without one select nothing)
    services: dict[str, dict[str, Mapping[str, str]]] = field(default_factory=dict)
    #: (kind, namespace, name) → the controller's selector
    controllers: dict[tuple[str, str, str], LabelSelector] = field(default_factory=dict)
    #: default_selector's answers by (namespace, labels, controller); emptied by every change
    #: to a Service or controller (asked for every member of every gang, changed rarely)
    _answers: dict[
        tuple[str, frozenset[tuple[str, str]], tuple[str, str] | None], LabelSelector | None
    ] = field(default_factory=dict)
    #: label_keys_read's answers by namespace; emptied with ``_answers``
    _keys_read: dict[str, frozenset[str]] = field(default_factory=dict)

    def upsert(self, kind: str, raw: Mapping[str, Any]) -> bool:
        """Apply an informer object (kind: Service or a controller kind); True if it changed."""
        self._forget_answers()
        meta = raw.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        spec = raw.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        selector = spec.get("selector")
        if kind == "Service":
            in_namespace = self.services.setdefault(namespace, {})
            before = in_namespace.get(name)
            if not isinstance(selector, Mapping):
                in_namespace.pop(name, None)
                return before is not None
            clean = {k: v for k, v in selector.items() if isinstance(k, str) and isinstance(v, str)}
            in_namespace[name] = clean
            return before != clean
        if kind == "ReplicationController":  # a plain map, like a Service's
            parsed = _from_map(selector)
        else:
            try:
                parsed = parse_selector(selector, "spec.selector")
            except SelectorError:
                parsed = NOTHING
        key = (kind, namespace, name)
        changed = self.controllers.get(key) != parsed
        self.controllers[key] = parsed
        return changed

    def remove(self, kind: str, namespace: str, name: str) -> None:
        self._forget_answers()
        if kind == "Service":
            self.services.get(namespace, {}).pop(name, None)
        else:
            self.controllers.pop((kind, namespace, name), None)

    def _forget_answers(self) -> None:
        self._answers.clear()
        self._keys_read.clear()

    def label_keys_read(self, namespace: str) -> frozenset[str]:
        """The pod label keys the default selector of a pod in ``namespace`` depends on: those
        its Services select by (a controller's selector is merged whatever the pod's labels)."""
        found = self._keys_read.get(namespace)
        if found is None:
            selectors = self.services.get(namespace, {}).values()
            found = self._keys_read[namespace] = frozenset(k for s in selectors for k in s)
        return found

    def default_selector(
        self, namespace: str, labels: Mapping[str, str], controller: tuple[str, str] | None
    ) -> LabelSelector | None:
        """``DefaultSelector``: the merged selectors of the pod's Services and controller;
        None when nothing selects the pod (then no default constraint applies)."""
        if not self.services.get(namespace) and self._owner(namespace, controller) is None:
            return None  # nothing there to select it: no label set to remember
        key = (namespace, frozenset(labels.items()), controller)
        try:
            return self._answers[key]
        except KeyError:
            pass
        if len(self._answers) >= MAX_ANSWERS:
            self._answers.clear()
        answer = self._answers[key] = self._default_selector(namespace, labels, controller)
        return answer

    def _default_selector(
        self, namespace: str, labels: Mapping[str, str], controller: tuple[str, str] | None
    ) -> LabelSelector | None:
        merged: dict[str, str] = {}
        for selector in self.services.get(namespace, {}).values():
            if all(labels.get(k) == v for k, v in selector.items()):
                merged.update(selector)
        requirements = [Requirement(k, "In", frozenset((v,))) for k, v in sorted(merged.items())]
        owner = self._owner(namespace, controller)
        if owner is not None and not owner.nothing:
            requirements += owner.requirements
        return LabelSelector(tuple(requirements)) if requirements else None

    def _owner(self, namespace: str, controller: tuple[str, str] | None) -> LabelSelector | None:
        """The selector of the pod's controller, if it is a tracked ReplicaSet, StatefulSet or
        ReplicationController."""
        if controller is None or controller[0] not in CONTROLLER_KINDS:
            return None
        return self.controllers.get((controller[0], namespace, controller[1]))


def _from_map(selector: Any) -> LabelSelector:
    if not isinstance(selector, Mapping) or not selector:
        return NOTHING
    return LabelSelector(
        tuple(Requirement(str(k), "In", frozenset((str(v),))) for k, v in sorted(selector.items()))
    )
