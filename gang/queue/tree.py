"""The queue tree: every queue object the informers read, checked, and which queue a gang is in.

Why one tree: a shared cluster may hold Volcano Queues, KAI Queues and ElasticQuotas at once (a
platform moving from one to another), and fair share is only fair if it divides one capacity
among all of them. So every ``QueueSpec`` (``gang.models.queueapis``) becomes a node of one tree:
the top-level queues of every API, and gang's ``default`` queue for gangs that name none, are
siblings under the cluster.

What is checked here, so that a bad object is reported and never acted on (its gangs wait with
the reason; every other queue keeps being served):
- the object itself (a negative or unparsable quantity, quota above limit: ``QueueSpec.error``);
- a parent that does not exist, or parents that form a cycle;
- children whose guarantees add up to more than their parent guarantees (checked for the
  resources the parent states a guarantee for);
- a queue under an invalid parent.

Which queue a gang is in (:meth:`QueueTree.resolve`): the queue its APIs name — a Volcano
PodGroup's ``spec.queue``, the label ``kai.scheduler/queue`` on its group or any of its pods —
else its namespace's ElasticQuota, else ``default``. Two different names, a queue that does not
exist, a closed queue or one with child queues (only leaves hold gangs) is an error the gang
waits with.

Invariant: ``problems()`` and ``children()`` are functions of ``specs`` alone; ``version`` is
bumped on every change of ``specs`` so callers may cache what they derive from it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from functools import cached_property

from gang.models.queueapis import (
    DEFAULT_QUEUE,
    ELASTIC_QUOTA,
    KAI_QUEUE,
    KAI_QUEUE_LABEL,
    QUEUE_API_BY_NAME,
    VOLCANO_DEFAULT_QUEUE,
    VOLCANO_QUEUE,
    QueueSpec,
    amount_text,
    default_queue,
)


@dataclass(frozen=True, slots=True)
class Membership:
    """The queue a gang is in, or why it cannot be scheduled for its queue."""

    queue: str | None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Claims:
    """What a gang's objects say about its queue (read by the tracker from pods and groups)."""

    namespace: str
    #: a Volcano PodGroup's ``spec.queue`` ("" when unset or not a Volcano group)
    volcano: str = ""
    #: distinct values of the KAI label on the group and its pods
    kai: frozenset[str] = frozenset()


class QueueTree:
    def __init__(self) -> None:
        #: every queue by key (``default`` always present)
        self.specs: dict[str, QueueSpec] = {DEFAULT_QUEUE: default_queue()}
        #: the queue APIs the server serves (an API not served names no queue that exists)
        self.served: set[str] = set()
        self.version = 0

    # --- the informers' side -------------------------------------------------------------

    def upsert(self, spec: QueueSpec) -> bool:
        """Record a queue object; True when it changed in a way that matters to scheduling
        (a new status alone — gang's own writes among them — is recorded, and is no change)."""
        before = self.specs.get(spec.key)
        self.specs[spec.key] = spec
        if (
            before is not None
            and replace(before, status=spec.status, resource_version=spec.resource_version) == spec
        ):
            return False
        self._changed()
        return True

    def remove(self, key: str) -> bool:
        if key == DEFAULT_QUEUE or self.specs.pop(key, None) is None:
            return False
        self._changed()
        return True

    def _changed(self) -> None:
        self.version += 1
        for name in ("_problems", "_children"):
            self.__dict__.pop(name, None)

    @property
    def in_use(self) -> bool:
        """Any queue besides ``default`` exists: fair share has something to divide."""
        return len(self.specs) > 1

    # --- structure -----------------------------------------------------------------------

    @cached_property
    def _children(self) -> dict[str | None, list[str]]:
        out: dict[str | None, list[str]] = {}
        for key in sorted(self.specs):
            parent = self.specs[key].parent
            out.setdefault(parent if parent in self.specs else None, []).append(key)
        return out

    def children(self, key: str | None) -> list[str]:
        """The children of ``key`` (``None``: the top-level queues), sorted by key."""
        return self._children.get(key, [])

    def is_leaf(self, key: str) -> bool:
        return not self.children(key)

    def ancestors(self, key: str) -> list[str]:
        """``key`` and its parents up to the top, nearest first (stops at a cycle)."""
        out: list[str] = []
        at: str | None = key
        while at is not None and at in self.specs and at not in out:
            out.append(at)
            at = self.specs[at].parent
        return out

    # --- validation ----------------------------------------------------------------------

    @cached_property
    def _problems(self) -> dict[str, str]:
        problems: dict[str, str] = {}
        for key, spec in self.specs.items():
            if spec.error is not None:
                problems[key] = spec.error
            elif spec.parent is not None and spec.parent not in self.specs:
                problems[key] = f"parent queue {display_name(spec.parent)} does not exist"
            else:
                cycle = self._cycle(key)
                if cycle:
                    problems[key] = "its parents form a cycle: " + " → ".join(
                        display_name(k) for k in cycle
                    )
        for key, spec in self.specs.items():
            # Volcano refuses children guaranteed more than their parent; KAI lets a parent's
            # children ask quotas beyond its own (they share what the parent gets), so a KAI
            # quota is no such promise and its tree is not refused for it
            if key in problems or not spec.guarantee or spec.api != VOLCANO_QUEUE:
                continue
            kids = [self.specs[k] for k in self.children(key)]
            for resource, own in sorted(spec.guarantee.items()):
                total = sum(k.guarantee.get(resource, 0) for k in kids)
                if total > own:
                    problems[key] = (
                        f"its child queues guarantee {amount_text(resource, total)}, more than "
                        f"its own guarantee of {amount_text(resource, own)}"
                    )
                    break
        # a queue under an invalid one cannot be placed in the tree's division either
        for key in self.specs:
            if key in problems:
                continue
            for parent in self.ancestors(key)[1:]:
                if parent in problems:
                    problems[key] = f"parent queue {display_name(parent)} is invalid"
                    break
        return problems

    def _cycle(self, key: str) -> list[str]:
        seen: list[str] = []
        at: str | None = key
        while at is not None and at in self.specs:
            if at in seen:
                return [*seen[seen.index(at) :], at]
            seen.append(at)
            at = self.specs[at].parent
        return []

    def problems(self) -> Mapping[str, str]:
        """Why each unusable queue is unusable (only those)."""
        return self._problems

    def valid(self) -> list[str]:
        return [k for k in self.specs if k not in self._problems]

    # --- membership ----------------------------------------------------------------------

    def resolve(self, claims: Claims) -> Membership:
        """The queue a gang is in (see the module docstring)."""
        named: list[tuple[str, str]] = []  # (queue key, where it was named)
        if claims.volcano and VOLCANO_QUEUE in self.served:
            key = QUEUE_API_BY_NAME[VOLCANO_QUEUE].key(claims.volcano)
            implicit_default = claims.volcano == VOLCANO_DEFAULT_QUEUE and key not in self.specs
            if not implicit_default:
                named.append((key, f"its Volcano PodGroup's spec.queue names {claims.volcano}"))
        if len(claims.kai) > 1:
            names = ", ".join(sorted(claims.kai))
            return Membership(None, f"its pods name different queues ({KAI_QUEUE_LABEL}: {names})")
        for name in claims.kai:
            named.append(
                (QUEUE_API_BY_NAME[KAI_QUEUE].key(name), f"label {KAI_QUEUE_LABEL} names {name}")
            )
        if len(named) > 1 and display_name(named[0][0]) != display_name(named[1][0]):
            return Membership(None, f"it names two queues: {named[0][1]}, {named[1][1]}")
        if named:
            existing = [k for k, _ in named if k in self.specs]
            if not existing:
                key = named[0][0]
                return Membership(
                    None, f"queue {display_name(key)} ({_api_text(key)}) does not exist"
                )
            return self._usable(existing[0])
        quota = QUEUE_API_BY_NAME[ELASTIC_QUOTA].key(claims.namespace)
        if quota in self.specs:
            return self._usable(quota)
        return Membership(DEFAULT_QUEUE)

    def _usable(self, key: str) -> Membership:
        problem = self._problems.get(key)
        if problem is not None:
            return Membership(key, f"queue {display_name(key)} is invalid: {problem}")
        if not self.specs[key].open:
            return Membership(key, f"queue {display_name(key)} is closed")
        if not self.is_leaf(key):
            kids = ", ".join(display_name(k) for k in self.children(key))
            return Membership(
                key,
                f"queue {display_name(key)} has child queues ({kids}); only leaf queues hold gangs",
            )
        return Membership(key)


def claims_of(namespace: str, volcano_queue: str, labels: Iterable[Mapping[str, str]]) -> Claims:
    """The queue claims of a gang from its Volcano queue and the labels of its group and pods."""
    kai = frozenset(v for found in labels if (v := found.get(KAI_QUEUE_LABEL)))
    return Claims(namespace, volcano_queue, kai)


def display_name(key: str) -> str:
    """The name users gave a queue (its key without the API)."""
    return key.partition("/")[2] or key


def _api_text(key: str) -> str:
    api = QUEUE_API_BY_NAME.get(key.partition("/")[0])
    return f"{api.group} {api.kind}" if api is not None else "queue"
