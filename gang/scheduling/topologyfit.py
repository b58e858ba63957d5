"""Which topology domains a gang takes: the tightest one that holds it, then as few below it.

Distributed training is bound by the network between its workers, so a gang may ask to sit
inside one domain of a level (a rack, a block) — *required* — or to try to (*preferred*,
climbing one level coarser at a time when no domain of the level holds it, never past the
required one). This module answers, from how many members each node can take, which domains
the gang takes and how many members go into each finest-level domain; the placer then places
the members inside those domains with every Filter and Score rule, one leaf's share at a time.

The choice follows Kueue's topology-aware scheduling (``tas_flavor_snapshot.go``), whose test
table is replayed against this module (``tests/unit/test_kueue_topology_reference.py``):

- *Best fit*: at the request level, the domain with the fewest slots that still holds the whole
  gang (ties: fewer member slots, then label values), so big free domains stay whole for big gangs.
- *Descent*: below the chosen domain, children are taken largest first, and the last one is the
  tightest that holds what is left ("as few domains as possible, the last as tight as possible").
- *Slices*: a gang asking for slices of ``size`` members, each inside one domain of the slice
  level, is counted in whole slices down to that level; below it each slice's members spread as
  above.
- *Unconstrained* (Kueue's explicit "unconstrained" request): least free capacity first, and
  several domains when one does not hold the gang.

Everything here is a pure function of arrays, so a decision is deterministic and testable
without a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from gang.models.topologyapis import TopologyConstraint, level_name
from gang.state.topology import DomainTree

Ids = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class Chosen:
    """The domains a gang takes: ``leaves`` are (finest-level domain, members), in label-value
    order; ``level``/``domains`` where the fit was found (a coarser level than asked when a
    preferred level held no domain big enough)."""

    leaves: list[tuple[int, int]]
    level: int
    domains: list[int]


@dataclass(frozen=True, slots=True)
class Missed:
    """No domain choice holds the gang: why, and how much of it the best choice held, in units
    of ``unit`` members (a slice's size when whole slices were counted)."""

    message: str
    fits: int
    need: int
    unit: int = 1


@dataclass(frozen=True, slots=True)
class _Counts:
    """Per level and domain: member slots, and whole slices (0 below the slice level)."""

    pods: list[Ids]
    slices: list[Ids]


def choose(
    tree: DomainTree,
    slots: Ids,
    count: int,
    constraint: TopologyConstraint,
    within: int | None = None,
    held: Mapping[int, int] | None = None,
) -> Chosen | Missed:
    """The domains for ``count`` members, given each node row's member ``slots``.

    ``within``: a domain at the required level the gang must stay in (its members already run
    there). ``held``: with slices, the gang's members already placed per domain of the slice
    level: a slice they began is completed inside its domain first. A count that is no whole
    number of slices is planned as the next whole number (room for whole slices)."""
    last = len(tree.levels) - 1
    size = constraint.slice_size
    slice_level = last if constraint.slice_level is None else constraint.slice_level
    leaf_pods = _leaf_pods(tree, slots)
    completed: list[tuple[int, int]] = []
    if held and size > 1:
        done = _complete_slices(tree, leaf_pods, held, constraint, slice_level, count)
        if isinstance(done, Missed):
            return done
        completed = done
        count -= sum(n for _, n in completed)
        if count <= 0:
            return Chosen(_merged(tree, completed), slice_level, sorted(held))
    counts = _count(tree, leaf_pods, size, slice_level)
    need = -(-count // size)
    least_free = constraint.unconstrained
    required = constraint.required
    at, top = _levels_to_try(constraint, last)
    while True:
        domains = _candidates(tree, at, required, within)
        if not len(domains):
            return _no_domain(tree, at, need, size)
        order = _sorted(tree, counts, at, domains, least_free)
        cap = counts.slices[at]
        one = _one_domain(order, cap, need, least_free)
        if one is not None:
            chosen = [(one, need)]
            break
        if required is not None and at == required:
            best = int(cap[order[-1]] if least_free else cap[order[0]])
            return Missed(_required_miss(tree, constraint, at, best, need), best, need, size)
        if at > top and not least_free:
            at -= 1  # preferred: one level coarser
            continue
        spread = _fill(order, cap, need, not least_free)
        reached = sum(n for _, n in spread)
        if reached < need:
            return Missed(_spread_miss(tree, constraint, at, reached, need), reached, need, size)
        chosen = spread
        break
    fit_level, fit_domains = at, [d for d, _ in chosen]
    # above the slice level: pool the children of every chosen domain, counted in slices
    while at < min(last, slice_level):
        children = _children(tree, at + 1, [d for d, _ in chosen])
        order = _sorted(tree, counts, at + 1, children, least_free)
        chosen = _fill(order, counts.slices[at + 1], sum(n for _, n in chosen), not least_free)
        at += 1
    members = [(d, n * size) for d, n in chosen]  # from here on, in members
    while at < last:
        below: list[tuple[int, int]] = []
        for domain, n in members:
            children = _children(tree, at + 1, [domain])
            order = _sorted(tree, counts, at + 1, children, least_free)
            below += _fill(order, counts.pods[at + 1], n, not least_free)
        members = below
        at += 1
    return Chosen(_merged(tree, completed + members), fit_level, fit_domains)


def _levels_to_try(constraint: TopologyConstraint, last: int) -> tuple[int, int]:
    """The level to look for one domain at first, and the coarsest level the search may climb
    to: preferred up to required (or the top); slices alone from the top; unconstrained at the
    finest level."""
    required = constraint.required
    if constraint.preferred is not None:
        at = constraint.preferred
    elif required is not None:
        at = required
    else:
        at = 0 if constraint.slice_level is not None else last
    return at, required if required is not None else 0


def _no_domain(tree: DomainTree, level: int, need: int, size: int) -> Missed:
    return Missed(f"no {level_name(tree.levels[level])} domain has free nodes", 0, need, size)


def _merged(tree: DomainTree, leaves: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Leaf counts summed per leaf, in label-value order, empty ones left out."""
    total: dict[int, int] = {}
    for leaf, n in leaves:
        total[leaf] = total.get(leaf, 0) + n
    values = tree.values[len(tree.levels) - 1]
    return sorted(((d, n) for d, n in total.items() if n > 0), key=lambda dn: values[dn[0]])


def _leaf_pods(tree: DomainTree, slots: Ids) -> Ids:
    ids = tree.ids[-1]
    inside = ids >= 0
    leaf: Ids = np.bincount(
        ids[inside], weights=slots[inside], minlength=tree.size(len(tree.levels) - 1)
    ).astype(np.int64)
    return leaf


def _complete_slices(
    tree: DomainTree,
    leaf_pods: Ids,
    held: Mapping[int, int],
    constraint: TopologyConstraint,
    slice_level: int,
    count: int,
) -> list[tuple[int, int]] | Missed:
    """Leaf counts that complete the slices the gang's placed members began (each inside its
    own domain of the slice level); ``leaf_pods`` loses what they take."""
    last = len(tree.levels) - 1
    size = constraint.slice_size
    name = level_name(tree.levels[slice_level])
    taken: list[tuple[int, int]] = []
    ancestor = tree.ancestors(last, slice_level)
    for domain, n in sorted(held.items()):
        short = min((-n) % size, count)
        if short == 0:
            continue
        leaves = [int(d) for d in np.flatnonzero(ancestor == domain)]
        order = sorted(leaves, key=lambda d: (-int(leaf_pods[d]), tree.values[last][d]))
        filled = _fill(order, leaf_pods, short, True)
        room = sum(k for _, k in filled)
        if room < short:
            where = "/".join(tree.values[slice_level][domain])
            return Missed(
                f"slices: the slice in {name} {where} has {n % size} of {size} members and room "
                f"for {room} of the {short} it lacks",
                room,
                short,
            )
        for leaf, k in filled:
            leaf_pods[leaf] -= k
        taken += filled
        count -= short
    return taken


def _count(tree: DomainTree, leaf_pods: Ids, size: int, slice_level: int) -> _Counts:
    last = len(tree.levels) - 1
    pods: list[Ids] = [leaf_pods]
    for level in range(last - 1, -1, -1):
        pods.insert(
            0,
            np.bincount(tree.parent[level + 1], weights=pods[0], minlength=tree.size(level)).astype(
                np.int64
            ),
        )
    slices: list[Ids] = [np.zeros(tree.size(level), dtype=np.int64) for level in range(len(pods))]
    slices[slice_level] = pods[slice_level] // size
    for level in range(slice_level - 1, -1, -1):
        slices[level] = np.bincount(
            tree.parent[level + 1], weights=slices[level + 1], minlength=tree.size(level)
        ).astype(np.int64)
    return _Counts(pods, slices)


def _candidates(tree: DomainTree, level: int, required: int | None, within: int | None) -> Ids:
    """The domains of ``level`` (inside ``within``, a domain of the required level)."""
    domains = np.arange(tree.size(level), dtype=np.int64)
    if within is None or required is None:
        return domains
    if level < required:  # coarser than the required level: only within's ancestor
        return tree.ancestors(required, level)[[within]]
    result: Ids = domains[tree.ancestors(level, required) == within]
    return result


def _children(tree: DomainTree, level: int, parents: Sequence[int]) -> Ids:
    result: Ids = np.flatnonzero(np.isin(tree.parent[level], parents)).astype(np.int64)
    return result


def _sorted(
    tree: DomainTree, counts: _Counts | _LeaderCounts, level: int, domains: Ids, least_free: bool
) -> list[int]:
    """Most slices first (best fit) or fewest (least free capacity), then fewer member
    slots, then label values: the order every choice walks."""
    slices, pods, values = counts.slices[level], counts.pods[level], tree.values[level]
    sign = 1 if least_free else -1
    return sorted(
        (int(d) for d in domains),
        key=lambda d: (sign * int(slices[d]), int(pods[d]), values[d]),
    )


def _one_domain(order: list[int], cap: Ids, need: int, least_free: bool) -> int | None:
    """The single domain that holds ``need``: the tightest (best fit), or the first in
    least-free order; None when none does."""
    if least_free:
        return next((d for d in order if cap[d] >= need), None)
    if not order or cap[order[0]] < need:
        return None
    return _tightest(order, cap, need)


def _tightest(order: list[int], cap: Ids, need: int) -> int:
    """The first domain in ``order`` with the fewest slots that still hold ``need``."""
    best, best_cap = order[0], None
    for d in order:
        c = int(cap[d])
        if c >= need and (best_cap is None or c < best_cap):
            best, best_cap = d, c
    return best


def _fill(order: list[int], cap: Ids, need: int, best_fit: bool) -> list[tuple[int, int]]:
    """Take domains in ``order`` until ``need`` is held, the last one (best fit) the tightest
    that holds what is left; fewer than ``need`` when they all do not."""
    taken: list[tuple[int, int]] = []
    left = need
    for i, domain in enumerate(order):
        if left == 0:
            break
        have = int(cap[domain])
        if have <= 0:
            continue
        if have >= left:
            last = _tightest(order[i:], cap, left) if best_fit else domain
            taken.append((last, left))
            return taken
        taken.append((domain, have))
        left -= have
    return taken


def _unit(constraint: TopologyConstraint, n: int) -> str:
    if constraint.slice_size > 1:
        return f"{n} slice(s) of {constraint.slice_size} members"
    return f"{n} members"


def _required_miss(
    tree: DomainTree, constraint: TopologyConstraint, level: int, best: int, need: int
) -> str:
    name = level_name(tree.levels[level])
    unit = "slice(s)" if constraint.slice_size > 1 else "members"
    return (
        f"required {name}: the best {name} fits {best} of {_unit(constraint, need)}"
        if best
        else f"required {name}: no {name} fits any of {need} {unit}"
    ) + _slice_note(tree, constraint)


def _spread_miss(
    tree: DomainTree, constraint: TopologyConstraint, level: int, held: int, need: int
) -> str:
    name = level_name(tree.levels[level])
    return f"every {name} together fits {held} of {_unit(constraint, need)}" + _slice_note(
        tree, constraint
    )


def _slice_note(tree: DomainTree, constraint: TopologyConstraint) -> str:
    if constraint.slice_level is None or constraint.slice_size <= 1:
        return ""
    return f" (each slice inside one {level_name(tree.levels[constraint.slice_level])})"


# --- a leader and its workers ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Leader:
    """A gang's one member of another shape (a launcher, a LeaderWorkerSet leader), placed in
    the same domain as the others: per node row, whether it fits (0/1), and how many of the
    others still fit beside it there."""

    fits: Ids
    beside: Ids


@dataclass(frozen=True, slots=True)
class _LeaderCounts:
    """Per level and domain, as ``_Counts``, with the leader: whether it fits inside (0/1),
    and the member slots and whole slices left beside it (Kueue's ``WithLeader`` counts)."""

    pods: list[Ids]
    slices: list[Ids]
    lead: list[Ids]
    pods_beside: list[Ids]
    slices_beside: list[Ids]


def choose_with_leader(
    tree: DomainTree,
    slots: Ids,
    leader: Leader,
    count: int,
    constraint: TopologyConstraint,
    within: int | None = None,
) -> tuple[Chosen, int] | Missed:
    """As :func:`choose` for ``count`` members and one leader: the domains, and the finest
    domain the leader goes to (Kueue's pod-set groups: the leader counts where it fits, and
    the members beside it)."""
    last = len(tree.levels) - 1
    size = constraint.slice_size
    slice_level = last if constraint.slice_level is None else constraint.slice_level
    counts = _leader_count(tree, slots, leader, size, slice_level)
    need = -(-count // size)
    least_free = constraint.unconstrained
    required = constraint.required
    at, top = _levels_to_try(constraint, last)
    while True:
        domains = _candidates(tree, at, required, within)
        if not len(domains):
            return _no_domain(tree, at, need, size)
        order = _leader_sorted(tree, counts, at, domains, least_free)
        one = _one_with_leader(counts, at, order, need, least_free)
        if one is not None:
            chosen: list[int] = [one]
            break
        if required is not None and at == required:
            first = order[-1] if least_free else order[0]
            best = int(counts.slices[at][first])
            return Missed(_required_miss(tree, constraint, at, best, need), best, need, size)
        if at > top and not least_free:
            at -= 1
            continue
        spread = _spread_with_leader(tree, counts, at, order, need, least_free)
        if isinstance(spread, int):
            return Missed(_spread_miss(tree, constraint, at, spread, need), spread, need, size)
        chosen = spread
        break
    fit_level, fit_domains = at, list(chosen)
    assigned = _consume(counts, at, chosen, need, 1, least_free, slices=True)
    while at < min(last, slice_level):
        pool = _children(tree, at + 1, [d for d, _, _ in assigned])
        order = _sorted(tree, counts, at + 1, pool, least_free)
        total = sum(n for _, n, _ in assigned)
        assigned = _consume(counts, at + 1, order, total, 1, least_free, slices=True)
        at += 1
    members = [(d, n * size, lead) for d, n, lead in assigned]
    while at < last:
        below: list[tuple[int, int, int]] = []
        for domain, n, lead in members:
            pool = _children(tree, at + 1, [domain])
            order = _sorted(tree, counts, at + 1, pool, least_free)
            below += _consume(counts, at + 1, order, n, lead, least_free, slices=False)
        members = below
        at += 1
    leaders = [d for d, _, lead in members if lead]
    if not leaders:  # cannot happen: the chosen domains hold the leader
        return Missed("no domain holds the leader", 0, need, size)
    leaves = _merged(tree, [(d, n) for d, n, _ in members])
    return Chosen(leaves, fit_level, fit_domains), leaders[0]


def _leader_count(
    tree: DomainTree, slots: Ids, leader: Leader, size: int, slice_level: int
) -> _LeaderCounts:
    last = len(tree.levels) - 1
    ids = tree.ids[last]
    inside = ids >= 0
    n = tree.size(last)
    pods = np.bincount(ids[inside], weights=slots[inside], minlength=n).astype(np.int64)
    lead = (np.bincount(ids[inside], weights=leader.fits[inside], minlength=n) > 0).astype(np.int64)
    big = np.iinfo(np.int64).max
    penalty = np.full(n, big, dtype=np.int64)
    capable = inside & (leader.fits > 0)
    np.minimum.at(penalty, ids[capable], (slots - leader.beside)[capable])
    beside = np.where(lead > 0, pods - np.where(penalty == big, 0, penalty), pods)
    levels_pods, levels_lead, levels_beside = [pods], [lead], [beside]
    for level in range(last - 1, -1, -1):  # upwards, as Kueue's fillInCounts
        up = tree.parent[level + 1]
        child_pods, child_lead, child_beside = levels_pods[0], levels_lead[0], levels_beside[0]
        m = tree.size(level)
        total = np.bincount(up, weights=child_pods, minlength=m).astype(np.int64)
        has = np.bincount(up, weights=child_lead, minlength=m) > 0
        pen = np.full(m, big, dtype=np.int64)
        mask = child_lead > 0
        np.minimum.at(pen, up[mask], (child_pods - child_beside)[mask])
        levels_pods.insert(0, total)
        levels_lead.insert(0, has.astype(np.int64))
        levels_beside.insert(0, np.where(has, total - np.where(pen == big, 0, pen), 0))
    slices = [np.zeros(tree.size(level), dtype=np.int64) for level in range(last + 1)]
    slices_beside = [np.zeros(tree.size(level), dtype=np.int64) for level in range(last + 1)]
    slices[slice_level] = levels_pods[slice_level] // size
    slices_beside[slice_level] = levels_beside[slice_level] // size
    for level in range(slice_level - 1, -1, -1):
        up = tree.parent[level + 1]
        m = tree.size(level)
        child, child_beside, child_lead = (
            slices[level + 1],
            slices_beside[level + 1],
            levels_lead[level + 1],
        )
        slices[level] = np.bincount(up, weights=child, minlength=m).astype(np.int64)
        pen = np.full(m, big, dtype=np.int64)
        mask = child_lead > 0
        np.minimum.at(pen, up[mask], (child - child_beside)[mask])
        has = levels_lead[level] > 0
        slices_beside[level] = np.where(has, slices[level] - np.where(pen == big, 0, pen), 0)
    return _LeaderCounts(levels_pods, slices, levels_lead, levels_beside, slices_beside)


def _leader_sorted(
    tree: DomainTree, counts: _LeaderCounts, level: int, domains: Ids, least_free: bool
) -> list[int]:
    """Domains that hold the leader first, then by slices beside it (most first; fewest for
    least free capacity), then fewer member slots beside it, then label values."""
    lead, beside, pods_beside = (
        counts.lead[level],
        counts.slices_beside[level],
        counts.pods_beside[level],
    )
    values = tree.values[level]
    sign = 1 if least_free else -1
    return sorted(
        (int(d) for d in domains),
        key=lambda d: (-int(lead[d]), sign * int(beside[d]), int(pods_beside[d]), values[d]),
    )


def _holding_leader(order: list[int], lead: Ids, leaders: int = 1) -> list[int]:
    """The domains of ``order`` that hold the leader (best fit among them only)."""
    return [d for d in order if lead[d] >= leaders]


def _one_with_leader(
    counts: _LeaderCounts, level: int, order: list[int], need: int, least_free: bool
) -> int | None:
    lead, beside = counts.lead[level], counts.slices_beside[level]
    if least_free:
        return next((d for d in order if lead[d] >= 1 and beside[d] >= need), None)
    top = order[0]
    if lead[top] >= 1 and beside[top] >= need:
        return _tightest(_holding_leader(order, lead), beside, need)
    return None


def _spread_with_leader(
    tree: DomainTree,
    counts: _LeaderCounts,
    level: int,
    order: list[int],
    need: int,
    least_free: bool,
) -> list[int] | int:
    """Several domains: one that holds the leader (with the members beside it) first, then the
    rest largest first, the last the tightest; how many slices they hold when short."""
    lead, beside, slices = counts.lead[level], counts.slices_beside[level], counts.slices[level]
    order = _lead_first(counts, level, order, need)
    taken: list[int] = []
    left = need
    index = 0
    if index < len(order) and lead[order[index]] > 0:
        domain = order[index]
        if not least_free and beside[domain] >= left:
            domain = _tightest(_holding_leader(order[index:], lead), beside, left)
        taken.append(domain)
        left -= int(beside[domain])
        index += 1
    else:
        return 0
    rest = _sorted(tree, counts, level, np.array(order[index:], dtype=np.int64), least_free)
    for i, domain in enumerate(rest):
        if left <= 0:
            break
        if not least_free and slices[domain] >= left:
            domain = _tightest(rest[i:], slices, left)
        taken.append(domain)
        left -= int(slices[domain])
    return taken if left <= 0 else need - left


def _lead_first(counts: _LeaderCounts, level: int, order: list[int], need: int) -> list[int]:
    """A domain holding the leader moved to the front, if the rest still hold ``need`` with it
    (Kueue's prioritizeLeaderDomain)."""
    if len(order) < 2:
        return order
    lead, slices, beside = counts.lead[level], counts.slices[level], counts.slices_beside[level]
    total = sum(int(slices[d]) for d in order)
    for i, domain in enumerate(order):
        if lead[domain] < 1 or total - (int(slices[domain]) - int(beside[domain])) < need:
            continue
        return order if i == 0 else [domain, *order[:i], *order[i + 1 :]]
    return order


def _consume(
    counts: _LeaderCounts,
    level: int,
    order: list[int],
    need: int,
    leaders: int,
    least_free: bool,
    slices: bool,
) -> list[tuple[int, int, int]]:
    """Fill ``order`` with ``need`` (slices, or members) and ``leaders`` (0 or 1): (domain,
    how many, leader there) — the leader's domain first, the last one the tightest."""
    cap = counts.slices[level] if slices else counts.pods[level]
    cap_beside = counts.slices_beside[level] if slices else counts.pods_beside[level]
    lead = counts.lead[level]
    if leaders:
        order = _lead_first(counts, level, order, need)
    taken: list[tuple[int, int, int]] = []
    left, leader_left = need, leaders
    for i, domain in enumerate(order):
        if left <= 0 and leader_left <= 0:
            break
        if leader_left > 0:
            if not least_free and cap_beside[domain] >= left and lead[domain] >= leader_left:
                domain = _tightest(_holding_leader(order[i:], lead, leader_left), cap_beside, left)
            here = min(int(cap_beside[domain]), left)
            leader_here = min(int(lead[domain]), leader_left)
            taken.append((domain, here, leader_here))
            left -= here
            leader_left -= leader_here
            continue
        if not least_free and cap[domain] >= left:
            domain = _tightest(order[i:], cap, left)
        here = min(int(cap[domain]), left)
        if here > 0:
            taken.append((domain, here, 0))
        left -= here
    return taken
