"""Fair share: one pure function of (queue tree, capacity, demand) → what each queue deserves now.

Why pure, and why this algorithm: fair share decides whose gang goes next and, later, whose gang
is reclaimed; users must be able to predict it, and tests must be able to state it as a table.
The division is KAI Scheduler's (``resource_division``), which platform teams already reason
about, and it reproduces KAI's own test table (``tests/data/kai/resource_division.yaml``).

For each resource separately, among siblings, with the capacity ``total`` their parent got:

1. **Quota**: every queue gets ``min(quota, requestable)`` where ``requestable`` is its demand
   capped by its limit (a quota of ``UNLIMITED`` is the whole total). Quotas are granted even
   when they add up to more than the total (a promise is kept in the arithmetic; the cluster
   simply cannot hold it at once).
2. **Over quota**, by queue priority (higher first): what remains is water-filled among the
   queues still wanting more, in proportion to their over-quota weight; a queue whose remaining
   want is below its proportional part gets exactly what it wants and the rest goes round again;
   otherwise it gets the whole units of its part (GPUs, millicores, bytes: the scheduler's units
   are all whole) and the fraction is remembered. Weight 0: nothing over quota.
3. **Leftovers**: the remembered fractions, largest first (then older queue, then name), earn one
   more unit each while whole units remain — so GPUs are divided in whole GPUs.

The tree is divided top-down: the top-level queues share the cluster's capacity, each parent's
fair share is shared among its children, and a parent's demand is its children's together.

A queue's **standing** is its dominant share (DRF): the largest, over resources, of what it holds
divided by its fair share. The queue with the lowest standing is furthest below its fair share.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

#: a limit of no limit, a quota of everything (KAI's -1)
UNLIMITED = -1.0


@dataclass(slots=True)
class Slot:
    """One queue's side of one resource's division. ``fair`` accumulates (the division only
    adds to it)."""

    name: str
    quota: float = 0.0
    limit: float = UNLIMITED
    weight: float = 1.0
    request: float = 0.0
    fair: float = 0.0
    priority: int = 0
    #: tie-break for leftovers: older first, then by uid
    creation: float = 0.0
    uid: str = ""

    def requestable(self) -> float:
        return self.request if self.limit == UNLIMITED else min(self.limit, self.request)

    def wants(self) -> float:
        """What it still wants: its requestable amount above its fair share so far."""
        requestable = self.requestable()
        return 0.0 if requestable < self.fair else requestable - self.fair

    def satisfied(self) -> bool:
        return self.request <= self.fair or (self.limit != UNLIMITED and self.limit <= self.fair)


def divide(total: float, slots: Sequence[Slot]) -> float:
    """Divide ``total`` of one resource among ``slots`` (siblings); returns what is left."""
    remaining = total
    for slot in slots:
        entitled = total if slot.quota == UNLIMITED else slot.quota
        given = min(entitled, slot.requestable())
        slot.fair += given
        remaining -= given
    if remaining <= 0:
        return 0.0
    return divide_over_quota(remaining, slots)


def divide_over_quota(remaining: float, slots: Sequence[Slot]) -> float:
    levels = sorted({s.priority for s in slots}, reverse=True)
    fractions: dict[int, dict[str, tuple[Slot, float]]] = {}
    for level in levels:
        members = [s for s in slots if s.priority == level]
        remaining, fractions[level] = _water_fill(remaining, members)
    for level in levels:
        if remaining <= 0:
            break
        ranked = sorted(
            fractions[level].values(), key=lambda item: (-item[1], item[0].creation, item[0].uid)
        )
        for slot, _ in ranked:
            if remaining == 0:
                break
            extra = min(1.0, remaining)
            slot.fair += extra
            remaining -= extra
    return remaining


def _water_fill(
    remaining: float, slots: Sequence[Slot]
) -> tuple[float, dict[str, tuple[Slot, float]]]:
    """Share ``remaining`` among one priority level by weight, in rounds; returns what is left
    and the fractions of a unit each queue was owed but not given."""
    fractions: dict[str, tuple[Slot, float]] = {}
    while True:
        at_start = remaining
        weight = sum(s.weight for s in slots if s.wants() > 0)
        if weight == 0:
            break
        parts = {s.name: s.weight / weight for s in slots if not s.satisfied()}
        whole = sum(parts.values())
        if whole == 0:
            break
        again = False
        for slot in slots:
            if remaining == 0:
                break
            if slot.satisfied() or slot.weight == 0:
                continue
            want = slot.wants()
            part = at_start * (parts[slot.name] / whole)
            if want <= part:
                given = want
                fractions.pop(slot.name, None)
            else:
                given = float(math.floor(part))
                if part - given > 0:
                    fractions[slot.name] = (slot, part - given)
            if given == 0:
                continue
            slot.fair += given
            remaining -= given
            again = again or want < part
        if not again or remaining == 0:
            break
    return remaining, fractions


# --- the tree --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueTerms:
    """What the division needs of one queue (from ``gang.models.queueapis.QueueSpec``)."""

    key: str
    priority: int = 0
    quota: Mapping[str, float] = field(default_factory=dict)
    limit: Mapping[str, float] = field(default_factory=dict)
    weight: Mapping[str, float] = field(default_factory=dict)
    default_weight: float = 1.0
    creation: float = 0.0


def fair_shares(
    queues: Mapping[str, QueueTerms],
    children: Callable[[str | None], Sequence[str]],
    capacity: Mapping[str, float],
    demand: Mapping[str, Mapping[str, float]],
) -> dict[str, dict[str, float]]:
    """Every queue's fair share per resource of ``capacity``, given each leaf's ``demand``
    (what it holds plus what its waiting gangs ask for). ``children(None)`` are the top-level
    queues; only queues in ``queues`` take part."""
    wanted = _demands(queues, children, demand)
    shares: dict[str, dict[str, float]] = {key: {} for key in queues}
    for resource, total in capacity.items():
        _divide_level(queues, children, None, float(total), resource, wanted, shares)
    return shares


def _demands(
    queues: Mapping[str, QueueTerms],
    children: Callable[[str | None], Sequence[str]],
    demand: Mapping[str, Mapping[str, float]],
) -> dict[str, dict[str, float]]:
    """Each queue's demand: a leaf's own, a parent's its children's together."""
    out: dict[str, dict[str, float]] = {}

    def visit(key: str) -> dict[str, float]:
        kids = [k for k in children(key) if k in queues]
        if not kids:
            out[key] = dict(demand.get(key, {}))
            return out[key]
        total: dict[str, float] = {}
        for kid in kids:
            for resource, amount in visit(kid).items():
                total[resource] = total.get(resource, 0.0) + amount
        out[key] = total
        return total

    for top in children(None):
        if top in queues:
            visit(top)
    return out


def _divide_level(
    queues: Mapping[str, QueueTerms],
    children: Callable[[str | None], Sequence[str]],
    parent: str | None,
    total: float,
    resource: str,
    wanted: Mapping[str, Mapping[str, float]],
    shares: dict[str, dict[str, float]],
) -> None:
    keys = [k for k in children(parent) if k in queues]
    if not keys:
        return
    slots = [_slot(queues[k], resource, wanted.get(k, {}).get(resource, 0.0)) for k in keys]
    divide(total, slots)
    for key, slot in zip(keys, slots, strict=True):
        shares[key][resource] = slot.fair
        _divide_level(queues, children, key, slot.fair, resource, wanted, shares)


def _slot(terms: QueueTerms, resource: str, request: float) -> Slot:
    return Slot(
        name=terms.key,
        quota=float(terms.quota.get(resource, 0.0)),
        limit=float(terms.limit.get(resource, UNLIMITED)),
        weight=float(terms.weight.get(resource, terms.default_weight)),
        request=request,
        priority=terms.priority,
        creation=terms.creation,
        uid=terms.key,
    )


def dominant_share(
    held: Mapping[str, float], fair: Mapping[str, float], resources: Iterable[str] | None = None
) -> float:
    """DRF standing: max over resources of held / fair share (0 when it holds nothing; infinite
    when it holds what its fair share has none of)."""
    worst = 0.0
    for resource in resources if resources is not None else held:
        amount = held.get(resource, 0.0)
        if amount <= 0:
            continue
        share = fair.get(resource, 0.0)
        worst = max(worst, amount / share if share > 0 else math.inf)
    return worst


# --- borrowing, as Kueue measures it ---------------------------------------------------------

#: Kueue's share of a weight-0 queue that borrows (its ``math.MaxInt``)
NEVER_FIRST = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Borrowing:
    """How much a queue borrows above its quota, as Kueue's fair sharing weighs it: per mille
    of what its siblings could lend, divided by its weight (Kueue's DRS)."""

    share: int
    #: the unrounded share (``inf`` for a weight-0 queue that borrows)
    precise: float
    #: the resource it borrows most of ("" when it borrows none)
    dominant: str
    #: it holds more than its quota of some resource (even one with nothing to lend)
    borrowing: bool
    #: the resources it borrows
    borrowed: frozenset[str] = frozenset()

    def borrowing_on(self, requested: Iterable[str]) -> bool:
        return any(r in self.borrowed for r in requested)


def borrowing(
    quota: Mapping[str, float],
    held: Mapping[str, float],
    lendable: Mapping[str, float],
    weight: float = 1.0,
    request: Mapping[str, float] | None = None,
) -> Borrowing:
    """Kueue's dominant resource share of one queue: for each resource it has a quota for,
    what it holds (plus ``request``) above that quota, per mille of ``lendable`` (its siblings'
    quotas together, its own included); the largest, divided by ``weight`` and rounded up.
    Shown beside the standing, and the tie-break between queues of equal standing: of two
    queues as far below their fair shares, the one borrowing less goes first."""
    borrowed: dict[str, float] = {}
    for resource, entitled in quota.items():
        over = (request or {}).get(resource, 0.0) + held.get(resource, 0.0) - entitled
        if over > 0:
            borrowed[resource] = over
    if not borrowed:
        return Borrowing(0, 0.0, "", False)
    ratio, dominant = 0.0, ""
    for resource in sorted(borrowed):
        pool = lendable.get(resource, 0.0)
        if pool > 0:
            value = borrowed[resource] * 1000.0 / pool
            if value > ratio:
                ratio, dominant = value, resource
    if ratio == 0:
        precise, share = 0.0, 0
    elif weight == 0:
        precise, share = math.inf, NEVER_FIRST
    else:
        precise = ratio / weight
        share = math.ceil(precise)
    return Borrowing(share, precise, dominant, True, frozenset(borrowed))


def share_text(precise: float) -> str:
    """A share as Kueue prints it: the shortest decimal that reads back the same, no exponent
    (``200``, ``2.5``, ``+Inf``)."""
    if math.isinf(precise):
        return "+Inf" if precise > 0 else "-Inf"
    return str(np.format_float_positional(precise, trim="-"))
