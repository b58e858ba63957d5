"""The structured allocator: which devices satisfy a set of ResourceClaims on one node.

Why this exists: kube-scheduler allocates one pod's claims at a time, so a gang's members can
each take devices that leave the last member short (upstream issue 138765) — the gang then holds
devices it cannot use. gang allocates every claim of a whole gang in its scheduling cycle, on the
snapshot: this module answers, for one node and the claims of the members placed there, the
allocation Kubernetes' own allocator (``k8s.io/dynamic-resource-allocation/structured``) would
write, or that there is none. The caller passes the devices already in use — by every allocated
claim in the cluster, kube-scheduler's too, plus what earlier members of the gang took — so two
members never get one device.

The search is upstream's: claims in order, requests in order, devices in pool → slice → device
order (pools sorted by driver and name; upstream iterates a map), depth-first with backtracking,
and the first complete answer wins. A device is a candidate when it is not in use (an
``adminAccess`` request may share one), every selector of its class and of the request accepts it
(CEL, :mod:`gang.scheduling.dra.cel`), it belongs to this node, its pool's shared counters still
cover what it consumes, its NoSchedule/NoExecute taints are tolerated, and the claim's
constraints (``matchAttribute``, ``distinctAttribute``) still hold with it. ``firstAvailable``
tries each alternative in order; ``allocationMode: All`` takes every matching device on the node
and fails if one of them is in use.

"Does not fit" is ``None``. Input no allocation can come from — a missing class, a selector that
does not compile or errs at run time, a pool that is being updated under an ``All`` request — is
:class:`AllocationError` with Kubernetes' wording; the cycle turns it into the gang's failure
message and goes on with the next gang.

Not built (alpha in Kubernetes 1.34): consumable capacity (multi-allocatable devices, capacity
requests, ``shareID``), binding conditions (a device that has them is never chosen, as upstream
does with the gate off), and list-typed attributes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gang.models.dra import (
    MAX_DEVICES_PER_CLAIM,
    AttributeValue,
    Constraint,
    Device,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
    SubRequest,
    Version,
)
from gang.scheduling.predicates import term_matches
from gang.state.nodefacts import NodeFacts
from gang.state.podinfo import PodParseError, node_selector_terms

__all__ = ["AllocationError", "Allocator", "DeviceId", "SelectorMemo", "gather_pools", "reaches"]

#: (driver, pool, device)
DeviceId = tuple[str, str, str]
#: (driver, pool, counter set, counter): one shared counter of a pool
CounterKey = tuple[str, str, str, str]
#: (expression, id of the Device object) → whether it selects the device
SelectorMemo = dict[tuple[str, int], bool]
_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


class AllocationError(Exception):
    """The claims cannot be allocated anywhere as they stand (not "no room")."""


@dataclass(slots=True)
class Pool:
    driver: str
    name: str
    generation: int
    #: the slices for this node (they offer its devices) and all of the generation's slices
    slices: list[ResourceSlice] = field(default_factory=list)
    every: list[ResourceSlice] = field(default_factory=list)
    incomplete: bool = False
    invalid: str | None = None

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


def _selector_matches(selector: Mapping[str, Any] | None, node: NodeFacts, where: str) -> bool:
    try:
        terms = node_selector_terms(selector, where)
    except PodParseError as err:
        raise AllocationError(f"{where}: {err}") from None
    return any(term_matches(t, node) for t in terms)


def reaches(allocation: Mapping[str, Any], node: NodeFacts) -> bool:
    """Whether an allocated claim (``status.allocation`` JSON) can be used on ``node``: its
    ``nodeSelector`` matches it (no selector: every node)."""
    selector = allocation.get("nodeSelector")
    if not selector:
        return True
    return _selector_matches(selector, node, "allocation's node selector")


def _placed_on(source: Device | ResourceSlice, node: NodeFacts, where: str) -> bool:
    """A slice's (or, with per-device node selection, a device's) node selection: one node,
    every node, or the nodes a selector matches; none of them set: not for us (a selection
    this version does not know)."""
    if source.node_name:
        return source.node_name == node.name
    if source.all_nodes:
        return True
    if source.node_selector is not None:
        return _selector_matches(source.node_selector, node, where)
    return False


def _device_on_node(device: Device, node: NodeFacts, slice_name: str) -> bool:
    where = f"node selector of device {device.name} in resource slice {slice_name}"
    return _placed_on(device, node, where)


def _slice_on_node(piece: ResourceSlice, node: NodeFacts) -> bool:
    if piece.per_device_node_selection:
        return any(_device_on_node(d, node, piece.name) for d in piece.devices)
    return _placed_on(piece, node, f"node selector in resource slice {piece.name}")


def _pool_invalid(slices: Sequence[ResourceSlice]) -> str | None:
    seen: set[str] = set()
    counter_sets: set[str] = set()
    for piece in slices:
        for name in piece.shared_counters:
            if name in counter_sets:
                return f"counter set {name} is defined in more than one slice"
            counter_sets.add(name)
    counters = {name: set(c) for piece in slices for name, c in piece.shared_counters.items()}
    for piece in slices:
        for device in piece.devices:
            if device.name in seen:
                return f"duplicate device name {device.name}"
            seen.add(device.name)
            for counter_set, consumed in device.consumes_counters.items():
                if counter_set not in counters:
                    return f"device {device.name} consumes from unknown counter set {counter_set}"
                if not set(consumed) <= counters[counter_set]:
                    return f"device {device.name} consumes an unknown counter of {counter_set}"
    return None


def gather_pools(slices: Iterable[ResourceSlice], node: NodeFacts) -> list[Pool]:
    """The pools with devices for ``node``, sorted by driver and name. A pool is its newest
    generation among the slices for ``node`` (a pool moving between nodes keeps the old
    generation here until it arrives, as upstream does). That generation's slices, wherever they
    point, decide whether the pool is complete (all ``resourceSliceCount`` of them there) and
    valid (no device twice, no counter set twice or missing); only the slices for ``node`` offer
    devices."""
    everywhere: dict[tuple[str, str, int], list[ResourceSlice]] = {}
    visible: dict[tuple[str, str], list[ResourceSlice]] = {}
    for piece in slices:
        everywhere.setdefault((piece.driver, piece.pool, piece.generation), []).append(piece)
        if not _slice_on_node(piece, node):
            continue
        key = (piece.driver, piece.pool)
        known = visible.get(key)
        if known is None or known[0].generation < piece.generation:
            visible[key] = [piece]
        elif known[0].generation == piece.generation:
            known.append(piece)
    pools = []
    for key in sorted(visible):
        mine = visible[key]
        every = everywhere[(key[0], key[1], mine[0].generation)]
        pool = Pool(key[0], key[1], mine[0].generation, mine, every)
        pool.incomplete = len(every) != every[0].slice_count
        pool.invalid = _pool_invalid(every)
        pools.append(pool)
    return pools


# --------------------------------------------------------------------------------------------
# one allocation attempt


@dataclass(slots=True)
class _Candidate:
    id: DeviceId
    device: Device
    piece: ResourceSlice
    pool: Pool


@dataclass(slots=True)
class _Result:
    request: str
    candidate: _Candidate
    admin_access: bool
    sub: SubRequest


class _ConstraintState:
    """One claim constraint while devices are added and taken back (a stack of values)."""

    def __init__(self, constraint: Constraint) -> None:
        self.requests = frozenset(constraint.requests)
        self.match = constraint.match_attribute
        self.distinct = constraint.distinct_attribute
        self.values: list[AttributeValue] = []

    def applies(self, request: str) -> bool:
        if not self.requests:
            return True
        base = request.split("/", 1)[0]
        return request in self.requests or base in self.requests

    def add(self, request: str, candidate: _Candidate) -> bool | None:
        """True: added; False: it would break the constraint; None: not about this request."""
        if not self.applies(request):
            return None
        name = self.match or self.distinct or ""
        value = candidate.device.attributes.get(name)
        if value is None:
            return False
        if isinstance(value, tuple):
            raise AllocationError(f"constraint on {name}: unsupported attribute value (a list)")
        if self.match is not None:
            if self.values and not _same(self.values[0], value):
                return False
        elif any(_same(v, value) for v in self.values):
            return False
        self.values.append(value)
        return True

    def remove(self) -> None:
        self.values.pop()


def _consumption(pool: Pool, device: Device) -> list[tuple[CounterKey, Decimal]]:
    """What ``device`` draws from its pool's shared counters, per counter."""
    return [
        ((pool.driver, pool.name, counter_set, counter), amount)
        for counter_set, counters in device.consumes_counters.items()
        for counter, amount in counters.items()
    ]


def _same(a: AttributeValue, b: AttributeValue) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, Version) and isinstance(b, Version):
        return str(a) == str(b)
    return a == b


def _tolerated(device: Device, sub: SubRequest) -> bool:
    return all(
        taint.effect not in _BLOCKING_EFFECTS or any(t.tolerates(taint) for t in sub.tolerations)
        for taint in device.taints
    )


@dataclass(frozen=True, slots=True)
class Allocator:
    """Allocates claims against one picture of the cluster's devices.

    ``in_use``: every device an allocated claim holds (adminAccess results excluded), plus those
    taken by earlier members of the gang being placed. ``memo`` caches selector results per
    device object; share one per snapshot.
    """

    classes: Mapping[str, DeviceClass]
    slices: Sequence[ResourceSlice]
    in_use: frozenset[DeviceId] | set[DeviceId] = frozenset()
    memo: SelectorMemo = field(default_factory=dict)

    def allocate(
        self, node: NodeFacts, claims: Sequence[ResourceClaim]
    ) -> list[dict[str, Any]] | None:
        """One AllocationResult (``status.allocation`` JSON) per claim, in order, or None when
        they do not fit on ``node`` together."""
        return _Search(self, node, claims).run()

    def selects(self, expression: str, driver: str, device: Device, owner: str, index: int) -> bool:
        """Whether selector #``index`` of ``owner`` (a class or a claim) accepts ``device``."""
        key = (expression, id(device))
        known = self.memo.get(key)
        if known is not None:
            return known
        # imported here: CEL costs ~0.15 s of start-up, paid only where a device is judged
        from gang.scheduling.dra import cel

        try:
            result = cel.matches(expression, cel.device_variable(driver, device))
        except cel.SelectorError as err:
            raise AllocationError(f"{owner}: selector #{index}: {err}") from None
        self.memo[key] = result
        return result


class _Search:
    def __init__(
        self, allocator: Allocator, node: NodeFacts, claims: Sequence[ResourceClaim]
    ) -> None:
        self.a = allocator
        self.node = node
        self.claims = claims
        self.pools = gather_pools(allocator.slices, node)
        self.taking: set[DeviceId] = set()
        self.results: list[list[_Result]] = [[] for _ in claims]
        self.constraints = [[_ConstraintState(c) for c in claim.constraints] for claim in claims]
        #: shared counters consumed: by devices in use (wherever they are), then by this search
        self.counters: dict[CounterKey, Decimal] = {}
        for pool in self.pools:
            for piece in pool.every:
                for device in piece.devices:
                    if (pool.driver, pool.name, device.name) in allocator.in_use:
                        for key, amount in _consumption(pool, device):
                            self.counters[key] = self.counters.get(key, Decimal(0)) + amount
        self.capacity: dict[CounterKey, Decimal] = {
            (pool.driver, pool.name, name, counter): amount
            for pool in self.pools
            for piece in pool.every
            for name, counters in piece.shared_counters.items()
            for counter, amount in counters.items()
        }
        self.saw_invalid = False
        #: per claim and request: the fewest devices the requests after it need
        self.least_after: list[list[int]] = []
        #: ``All`` requests: every matching device, computed before the search
        self.all_devices: dict[tuple[int, str], list[_Candidate]] = {}

    # --- setup ---------------------------------------------------------------------------

    def _name(self, claim: ResourceClaim) -> str:
        return f"{claim.namespace}/{claim.name}" if claim.namespace else claim.name

    def _validate(self) -> None:
        for index, claim in enumerate(self.claims):
            total = 0
            least_of: list[int] = []
            for request in claim.requests:
                least: int | None = None  # firstAvailable: the smallest alternative counts
                for sub in request.alternatives:
                    if sub.class_name not in self.a.classes:
                        raise AllocationError(
                            f"claim {self._name(claim)}, request {sub.name}: could not retrieve "
                            f"device class {sub.class_name}"
                        )
                    if sub.mode == "All":
                        found = self._all_matching(index, claim, sub)
                        self.all_devices[(index, sub.name)] = found
                        wanted = len(found)
                    else:
                        wanted = sub.count
                    least = wanted if least is None else min(least, wanted)
                total += least or 0
                least_of.append(least or 0)
            self.least_after.append([sum(least_of[p + 1 :]) for p in range(len(least_of))])
            if total > MAX_DEVICES_PER_CLAIM:
                raise AllocationError(
                    f"claim {self._name(claim)}: number of requested devices {total} exceeds the "
                    f"claim limit of {MAX_DEVICES_PER_CLAIM}"
                )

    def _all_matching(self, index: int, claim: ResourceClaim, sub: SubRequest) -> list[_Candidate]:
        found = []
        for pool in self.pools:
            if pool.incomplete:
                raise AllocationError(
                    f"claim {self._name(claim)}, request {sub.name}: asks for all devices, but "
                    f"resource pool {pool.id} is currently being updated"
                )
            if pool.invalid is not None:
                raise AllocationError(
                    f"claim {self._name(claim)}, request {sub.name}: asks for all devices, but "
                    f"resource pool {pool.id} is currently invalid"
                )
            for candidate in self._devices(pool):
                if self._selectable(claim, sub, candidate):
                    found.append(candidate)
        return found

    def _devices(self, pool: Pool) -> Iterator[_Candidate]:
        for piece in pool.slices:
            for device in piece.devices:
                if device.binding_conditions:
                    continue  # gang cannot wait for a device's binding conditions (not built)
                if piece.per_device_node_selection and not _device_on_node(
                    device, self.node, piece.name
                ):
                    continue
                yield _Candidate((pool.driver, pool.name, device.name), device, piece, pool)

    def _selectable(self, claim: ResourceClaim, sub: SubRequest, candidate: _Candidate) -> bool:
        """Every selector of the request's class, then of the request, accepts the device."""
        device_class = self.a.classes[sub.class_name]
        for owner, selectors in (
            (f"class {device_class.name}", device_class.selectors),
            (f"claim {self._name(claim)}", sub.selectors),
        ):
            for i, expression in enumerate(selectors):
                if not self.a.selects(
                    expression, candidate.pool.driver, candidate.device, owner, i
                ):
                    return False
        return True

    # --- the search ------------------------------------------------------------------------

    def run(self) -> list[dict[str, Any]] | None:
        self._validate()
        if not self._claim(0):
            if self.saw_invalid:
                raise AllocationError("invalid resource pools were encountered")
            return None
        return [self._allocation(i) for i in range(len(self.claims))]

    def _claim(self, index: int) -> bool:
        if index == len(self.claims):
            return True
        return self._request(index, 0)

    def _request(self, index: int, position: int) -> bool:
        claim = self.claims[index]
        if position == len(claim.requests):
            return self._claim(index + 1)
        request = claim.requests[position]
        return any(self._sub(index, position, sub, 0) for sub in request.alternatives)

    def _sub(self, index: int, position: int, sub: SubRequest, taken: int) -> bool:
        claim = self.claims[index]
        if taken == 0:
            wanted = len(self.all_devices[(index, sub.name)]) if sub.mode == "All" else sub.count
            later = self.least_after[index][position]
            if len(self.results[index]) + wanted + later > MAX_DEVICES_PER_CLAIM:
                return False  # this alternative leaves the claim's limit no room for the rest
        if sub.mode == "All":
            devices = self.all_devices[(index, sub.name)]
            if not devices:
                return False
            undo: list[Callable[[], None]] = []
            for candidate in devices:
                if self._in_use(index, sub, candidate):
                    self._rollback(undo)
                    return False
                done = self._take(index, claim, sub, candidate, must=True)
                if done is None:
                    self._rollback(undo)
                    return False
                undo.append(done)
            if self._request(index, position + 1):
                return True
            self._rollback(undo)
            return False
        if taken == sub.count:
            return self._request(index, position + 1)
        for pool in self.pools:
            if pool.incomplete:
                continue
            if pool.invalid is not None:
                self.saw_invalid = True
                continue
            for candidate in self._devices(pool):
                if self._in_use(index, sub, candidate):
                    continue
                if not self._selectable(claim, sub, candidate):
                    continue
                done = self._take(index, claim, sub, candidate, must=False)
                if done is None:
                    continue
                if self._sub(index, position, sub, taken + 1):
                    return True
                done()
        return False

    def _in_use(self, index: int, sub: SubRequest, candidate: _Candidate) -> bool:
        """Held by an allocated claim or taken in this allocation; a request with admin access
        may share a device with its users (but takes it once per claim)."""
        if sub.admin_access:
            return any(r.candidate.id == candidate.id for r in self.results[index])
        return candidate.id in self.taking or candidate.id in self.a.in_use

    @staticmethod
    def _rollback(undo: list[Callable[[], None]]) -> None:
        for done in reversed(undo):
            done()

    def _take(
        self, index: int, claim: ResourceClaim, sub: SubRequest, candidate: _Candidate, must: bool
    ) -> Callable[[], None] | None:
        """Add ``candidate`` for ``sub``; the undo, or None when it cannot be added."""
        consumed = _consumption(candidate.pool, candidate.device)
        for key, amount in consumed:
            if self.counters.get(key, Decimal(0)) + amount > self.capacity.get(key, Decimal(0)):
                return None
        if not _tolerated(candidate.device, sub):
            return None
        added: list[_ConstraintState] = []
        for state in self.constraints[index]:
            outcome = state.add(sub.name, candidate)
            if outcome is False:
                for done in reversed(added):
                    done.remove()
                if must:
                    raise AllocationError(
                        f"claim {self._name(claim)}, request {sub.name}: cannot add device "
                        f"{'/'.join(candidate.id)} because a claim constraint would not be satisfied"
                    )
                return None
            if outcome:
                added.append(state)
        for key, amount in consumed:
            self.counters[key] = self.counters.get(key, Decimal(0)) + amount
        if not sub.admin_access:
            self.taking.add(candidate.id)
        self.results[index].append(_Result(sub.name, candidate, sub.admin_access, sub))

        def undo() -> None:
            self.results[index].pop()
            if not sub.admin_access:
                self.taking.discard(candidate.id)
            for key, amount in consumed:
                self.counters[key] -= amount
            for state in reversed(added):
                state.remove()

        return undo

    # --- the answer --------------------------------------------------------------------------

    def _allocation(self, index: int) -> dict[str, Any]:
        claim = self.claims[index]
        results = []
        for r in self.results[index]:
            entry: dict[str, Any] = {
                "request": r.request,
                "driver": r.candidate.pool.driver,
                "pool": r.candidate.pool.name,
                "device": r.candidate.device.name,
            }
            if r.admin_access:
                entry["adminAccess"] = True
            if r.sub.tolerations:
                entry["tolerations"] = [dict(t.raw) for t in r.sub.tolerations]
            results.append(entry)
        config: list[dict[str, Any]] = []
        used_classes: dict[str, list[str]] = {}
        for r in self.results[index]:
            names = used_classes.setdefault(r.sub.class_name, [])
            if r.request not in names:
                names.append(r.request)
        for class_name, requests in used_classes.items():
            for class_config in self.a.classes[class_name].config:
                config.append({"source": "FromClass", "requests": list(requests), **class_config})
        allocated = {r.request for r in self.results[index]}
        allocated |= {name.split("/", 1)[0] for name in allocated}
        for item in claim.config:
            if item.requests and not allocated.intersection(item.requests):
                continue  # for an alternative of firstAvailable that was not chosen
            entry_out = {
                "source": "FromClaim",
                **{k: v for k, v in item.raw.items() if k != "requests"},
            }
            if item.requests:
                entry_out["requests"] = list(item.requests)
            config.append(entry_out)
        devices: dict[str, Any] = {"results": results}
        if config:
            devices["config"] = config
        allocation: dict[str, Any] = {"devices": devices}
        selector = self._node_selector(self.results[index])
        if selector is not None:
            allocation["nodeSelector"] = selector
        return allocation

    def _node_selector(self, results: Sequence[_Result]) -> dict[str, Any] | None:
        fields: list[dict[str, Any]] = []
        expressions: list[dict[str, Any]] = []
        for r in results:
            piece, device = r.candidate.piece, r.candidate.device
            source: Any = device if piece.per_device_node_selection else piece
            if source.node_name:
                return {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {
                                    "key": "metadata.name",
                                    "operator": "In",
                                    "values": [source.node_name],
                                }
                            ]
                        }
                    ]
                }
            if source.node_selector is not None:
                terms = source.node_selector.get("nodeSelectorTerms") or []
                if len(terms) > 1:
                    raise AllocationError(
                        f"unsupported ResourceSlice.NodeSelector with {len(terms)} terms"
                    )
                for term in terms[:1]:
                    for requirement in term.get("matchFields") or []:
                        if requirement not in fields:
                            fields.append(dict(requirement))
                    for requirement in term.get("matchExpressions") or []:
                        if requirement not in expressions:
                            expressions.append(dict(requirement))
        if not fields and not expressions:
            return None
        merged: dict[str, Any] = {}
        if expressions:
            merged["matchExpressions"] = expressions
        if fields:
            merged["matchFields"] = fields
        return {"nodeSelectorTerms": [merged]}
