"""Which Services and controllers select a pod: kube-scheduler's default spreading selector.

Why this exists: kube-scheduler spreads a pod that states no topology spread constraint of its
own by default constraints (the ``System`` defaults: hostname skew 3, zone skew 5, ScheduleAnyway)
whose selector is not written anywhere: it is the union of the selectors of the Services that
select the pod and of its controlling ReplicaSet, StatefulSet or ReplicationController
(``helper.DefaultSelector``). A pod nobody selects gets no default constraint. The informers
feed this catalog so the spread plugin can derive the same selector.

kube-scheduler matches every Service of the namespace against the pod. Here the Services are
indexed by the label keys their selectors read, then by those labels' values: the Services that
select a pod are found by projecting its labels onto each key set, one lookup a key set. Operators
stamp their Services from one shape (the v1 training operator makes a Service per replica, all
selecting by job name, replica type and index), so a namespace has a few key sets however many
Services it holds, and a pod of a job costs the same among ten Services or ten thousand.
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
#: a Service selector's label keys (sorted), and a pod's values for them
KeySet = tuple[str, ...]
Values = tuple[str, ...]


@dataclass(slots=True)
class SelectorCatalog:
    #: namespace → Service name → its ``spec.selector`` (Services without one select nothing)
    services: dict[str, dict[str, Mapping[str, str]]] = field(default_factory=dict)
    #: (kind, namespace, name) → the controller's selector
    controllers: dict[tuple[str, str, str], LabelSelector] = field(default_factory=dict)
    #: namespace → a selector's keys → their values → the Services selecting exactly those
    #: pairs. Invariant: holds exactly the selectors of ``services`` (kept by ``_index`` and
    #: ``_unindex``); no map in it is empty
    _by_keys: dict[str, dict[KeySet, dict[Values, set[str]]]] = field(default_factory=dict)
    #: default_selector's answers by (namespace, labels, controller); emptied by every change
    #: to a Service or controller (asked for every member of every gang, changed rarely)
    _answers: dict[
        tuple[str, frozenset[tuple[str, str]], tuple[str, str] | None], LabelSelector | None
    ] = field(default_factory=dict)
    #: label_keys_read's answers by namespace; emptied with ``_answers``
    _keys_read: dict[str, frozenset[str]] = field(default_factory=dict)
    #: counts the changes to what selects pods: an answer remembered elsewhere holds while
    #: this is what it was
    generation: int = 0

    def upsert(self, kind: str, raw: Mapping[str, Any]) -> bool:
        """Apply an informer object (kind: Service or a controller kind); True if it changed."""
        meta = raw.get("metadata")
        meta = meta if isinstance(meta, Mapping) else {}
        namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        spec = raw.get("spec")
        spec = spec if isinstance(spec, Mapping) else {}
        selector = spec.get("selector")
        if kind == "Service":
            before = self.services.get(namespace, {}).get(name)
            clean = (
                {k: v for k, v in selector.items() if isinstance(k, str) and isinstance(v, str)}
                if isinstance(selector, Mapping)
                else None
            )
            if clean == before:
                return False
            self._forget_answers()
            if before is not None:
                self._unindex(namespace, name, before)
            if clean is not None:
                self._index(namespace, name, clean)
            return True
        if kind == "ReplicationController":  # a plain map, like a Service's
            parsed = _from_map(selector)
        else:
            try:
                parsed = parse_selector(selector, "spec.selector")
            except SelectorError:
                parsed = NOTHING
        key = (kind, namespace, name)
        if self.controllers.get(key) == parsed:
            return False
        self._forget_answers()
        self.controllers[key] = parsed
        return True

    def remove(self, kind: str, namespace: str, name: str) -> None:
        if kind != "Service":
            if self.controllers.pop((kind, namespace, name), None) is not None:
                self._forget_answers()
            return
        before = self.services.get(namespace, {}).get(name)
        if before is not None:
            self._forget_answers()
            self._unindex(namespace, name, before)

    def _index(self, namespace: str, name: str, selector: Mapping[str, str]) -> None:
        """Add a Service to ``services`` and ``_by_keys``."""
        self.services.setdefault(namespace, {})[name] = selector
        keys, values = _keys_and_values(selector)
        by_values = self._by_keys.setdefault(namespace, {}).setdefault(keys, {})
        by_values.setdefault(values, set()).add(name)

    def _unindex(self, namespace: str, name: str, selector: Mapping[str, str]) -> None:
        """Drop a Service from ``services`` and ``_by_keys``, and the maps it leaves empty."""
        in_namespace = self.services[namespace]
        del in_namespace[name]
        if not in_namespace:
            del self.services[namespace]
        by_keys = self._by_keys[namespace]
        keys, values = _keys_and_values(selector)
        by_values = by_keys[keys]
        names = by_values[values]
        names.discard(name)
        if not names:
            del by_values[values]
            if not by_values:
                del by_keys[keys]
                if not by_keys:
                    del self._by_keys[namespace]

    def _forget_answers(self) -> None:
        self.generation += 1
        self._answers.clear()
        self._keys_read.clear()

    def label_keys_read(self, namespace: str) -> frozenset[str]:
        """The pod label keys the default selector of a pod in ``namespace`` depends on: those
        its Services select by (a controller's selector is merged whatever the pod's labels)."""
        found = self._keys_read.get(namespace)
        if found is None:
            key_sets = self._by_keys.get(namespace, {})
            found = self._keys_read[namespace] = frozenset(k for keys in key_sets for k in keys)
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
        for keys, by_values in self._by_keys.get(namespace, {}).items():
            try:
                values = tuple([labels[k] for k in keys])
            except KeyError:
                continue  # the pod lacks a key these Services select by
            if values in by_values:
                merged.update(zip(keys, values, strict=True))
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


def _keys_and_values(selector: Mapping[str, str]) -> tuple[KeySet, Values]:
    """A Service selector as its sorted keys and their values, in that order."""
    pairs = sorted(selector.items())
    return tuple(k for k, _ in pairs), tuple(v for _, v in pairs)


def _from_map(selector: Any) -> LabelSelector:
    if not isinstance(selector, Mapping) or not selector:
        return NOTHING
    return LabelSelector(
        tuple(Requirement(str(k), "In", frozenset((str(v),))) for k, v in sorted(selector.items()))
    )
