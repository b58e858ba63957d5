"""Topology asks as users write them, and the domain choice for a gang (pure functions).

The asks: Kueue's pod-template annotations (with its webhook's messages for what it refuses),
KAI's annotations, the native PodGroup's ``schedulingConstraints.topology``, Volcano's
``networkTopology`` over HyperNodes (their membership by name, pattern and labels), and what gang makes
of them against the declared topologies — a constraint, or a clear refusal. The choice: the
tree of domains over labelled nodes, best fit, the climb from a preferred level, a placed
member's domain kept, and slices completed inside the domain they began in.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gang.models.groupapis import API_BY_NAME, NATIVE
from gang.models.settings import TopologyLevels
from gang.models.topologyapis import (
    KAI_PREFERRED,
    KAI_REQUIRED,
    KAI_TOPOLOGY,
    KAI_TOPOLOGY_NAME,
    KUEUE_PREFERRED,
    KUEUE_REQUIRED,
    KUEUE_SLICE_REQUIRED,
    KUEUE_SLICE_SIZE,
    KUEUE_TOPOLOGY,
    KUEUE_UNCONSTRAINED,
    Topology,
    TopologyConstraint,
    asks_in_annotations,
    parse_topology,
    resolve,
    tier_key,
    volcano_ask,
)
from gang.scheduling.topologyfit import Chosen, Missed, choose
from gang.state.hypernodes import HyperNode, membership, parse_hypernode
from gang.state.nodefacts import node_facts
from gang.state.podinfo import parse_pod
from gang.state.topology import NodeDomains
from gang.state.topologybook import TopologyBook
from tests.unit.test_cache import make_node

BLOCK, RACK, HOST = "example.com/block", "example.com/rack", "kubernetes.io/hostname"
LEVELS = (BLOCK, RACK, HOST)
CLUSTER = Topology("cluster", KUEUE_TOPOLOGY, LEVELS)


def _resolve(annotations: dict[str, str], *topologies: Topology) -> Any:
    return resolve(asks_in_annotations(annotations), list(topologies) or [CLUSTER])


# --- asks ------------------------------------------------------------------------------------

REFUSED = [
    (
        "Kueue: two asks at once",
        {KUEUE_REQUIRED: RACK, KUEUE_PREFERRED: BLOCK},
        "must not contain more than one topology annotation",
    ),
    (
        "Kueue: a slice level without a size",
        {KUEUE_REQUIRED: BLOCK, KUEUE_SLICE_REQUIRED: RACK},
        f"{KUEUE_SLICE_SIZE}: must be set when",
    ),
    (
        "Kueue: a size without a slice level",
        {KUEUE_REQUIRED: BLOCK, KUEUE_SLICE_SIZE: "4"},
        "may not be set when",
    ),
    (
        "Kueue: a size that is no number",
        {KUEUE_REQUIRED: BLOCK, KUEUE_SLICE_REQUIRED: RACK, KUEUE_SLICE_SIZE: "four"},
        "must be a numeric value",
    ),
    ("Kueue: a size of 0", {KUEUE_SLICE_REQUIRED: RACK, KUEUE_SLICE_SIZE: "0"}, ">= 1"),
    (
        "Kueue: unconstrained is a boolean",
        {KUEUE_UNCONSTRAINED: "yes"},
        "must be a boolean value",
    ),
    (
        "an unknown level",
        {KUEUE_REQUIRED: "example.com/row"},
        "no topology has the required level example.com/row (levels known:",
    ),
    (
        "a slice level above the gang's level",
        {KUEUE_REQUIRED: RACK, KUEUE_SLICE_REQUIRED: BLOCK, KUEUE_SLICE_SIZE: "2"},
        f"podset slice topology {BLOCK} is above the podset topology {RACK}",
    ),
    (
        "KAI: required finer than preferred",
        {KAI_REQUIRED: RACK, KAI_PREFERRED: BLOCK},
        "the required level example.com/rack is finer than the preferred level",
    ),
    (
        "KAI: a topology named that does not exist",
        {KAI_TOPOLOGY_NAME: "other", KAI_REQUIRED: RACK},
        "no topology named other",
    ),
    (
        "KAI: a topology named, but no level",
        {KAI_TOPOLOGY_NAME: "cluster"},
        "no level is required or preferred",
    ),
    (
        "two APIs asking different things",
        {KUEUE_REQUIRED: RACK, KAI_REQUIRED: BLOCK},
        "the gang's topology requests disagree",
    ),
]


@pytest.mark.parametrize(
    ("annotations", "said"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED]
)
def test_bad_asks_are_refused_with_a_clear_message(annotations: dict[str, str], said: str) -> None:
    refusal = _resolve(annotations)
    assert isinstance(refusal, str)
    assert said.replace(">= 1", "greater than or equal to 1") in refusal


def test_asks_resolve_to_level_indices() -> None:
    assert _resolve({KUEUE_REQUIRED: RACK}) == TopologyConstraint(
        "kueue/cluster", LEVELS, required=1
    )
    both = _resolve({KAI_REQUIRED: BLOCK, KAI_PREFERRED: RACK})
    assert (both.required, both.preferred, both.unconstrained) == (0, 1, False)
    sliced = _resolve({KUEUE_REQUIRED: BLOCK, KUEUE_SLICE_REQUIRED: RACK, KUEUE_SLICE_SIZE: "4"})
    assert (sliced.slice_level, sliced.slice_size) == (1, 4)
    # slices alone: anywhere, least free capacity first (Kueue)
    alone = _resolve({KUEUE_SLICE_REQUIRED: RACK, KUEUE_SLICE_SIZE: "2"})
    assert alone.unconstrained and alone.required is None
    # the same ask twice (Kueue's and KAI's annotations agreeing) is one ask
    assert _resolve({KUEUE_REQUIRED: RACK, KAI_REQUIRED: RACK}).required == 1
    # explicit Kueue "unconstrained": placed as any gang is
    assert _resolve({KUEUE_UNCONSTRAINED: "true"}) is None
    assert resolve([], [CLUSTER]) is None


def _gang_of(annotations: dict[str, str], members: int = 2) -> list[Any]:
    return [
        parse_pod(
            {
                "metadata": {"name": f"p{i}", "namespace": "ns", "annotations": annotations},
                "spec": {"containers": []},
            }
        )
        for i in range(members)
    ]


def test_a_level_two_topologies_share_resolves_to_one_deterministically() -> None:
    """Settings first, then Kueue's, then KAI's, by name: whatever order they arrived in."""
    book = TopologyBook([TopologyLevels(name="z-settings", levels=["example.com/zone"])])
    book.upsert(Topology("a-kai", KAI_TOPOLOGY, (RACK, HOST)))
    book.upsert(CLUSTER)
    found = book.constraint(None, _gang_of({KUEUE_REQUIRED: RACK}), 2)
    assert isinstance(found, TopologyConstraint) and found.topology == "kueue/cluster"
    named = book.constraint(None, _gang_of({KAI_TOPOLOGY_NAME: "a-kai", KAI_REQUIRED: RACK}), 2)
    assert isinstance(named, TopologyConstraint) and named.levels == (RACK, HOST)
    assert book.remove("kueue/cluster")
    found = book.constraint(None, _gang_of({KUEUE_REQUIRED: RACK}), 2)
    assert isinstance(found, TopologyConstraint) and found.topology == "kai/a-kai"
    sliced = {KUEUE_REQUIRED: RACK, KUEUE_SLICE_REQUIRED: HOST, KUEUE_SLICE_SIZE: "4"}
    assert "do not divide its minMember 6" in str(book.constraint(None, _gang_of(sliced), 6))


def test_topology_objects_parse_and_bad_ones_say_why() -> None:
    good = {
        "metadata": {"name": "t"},
        "spec": {"levels": [{"nodeLabel": BLOCK}, {"nodeLabel": RACK}]},
    }
    assert parse_topology(good, KUEUE_TOPOLOGY) == Topology("t", KUEUE_TOPOLOGY, (BLOCK, RACK))
    twice = {"metadata": {"name": "t"}, "spec": {"levels": [{"nodeLabel": RACK}] * 2}}
    broken = parse_topology(twice, KAI_TOPOLOGY)
    assert broken.error is not None and "more than once" in broken.error
    assert "invalid" in _resolve({KAI_TOPOLOGY_NAME: "t", KAI_REQUIRED: RACK}, broken)
    empty = parse_topology({"metadata": {"name": "e"}, "spec": {}}, KUEUE_TOPOLOGY)
    assert empty.error is not None and "Required" in empty.error


def test_asks_are_read_from_pods_and_the_native_podgroup() -> None:
    pod = parse_pod(
        {
            "metadata": {"name": "p", "namespace": "ns", "annotations": {KUEUE_REQUIRED: RACK}},
            "spec": {"containers": []},
        }
    )
    assert resolve(pod.topology, [CLUSTER]) == TopologyConstraint("kueue/cluster", LEVELS, 1)
    native = {
        "metadata": {"name": "g", "namespace": "ns"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "schedulingConstraints": {"topology": [{"key": "example.com/zone"}]},
        },
    }
    (group,) = API_BY_NAME[NATIVE].parse(native, "v1alpha2")
    # a plain node label no topology declares: a topology of that one level
    found = resolve(group.topology, [CLUSTER])
    assert isinstance(found, TopologyConstraint) and found.levels == ("example.com/zone",)
    native["spec"]["schedulingConstraints"]["topology"] = [{"key": RACK}, {"key": BLOCK}]
    (group,) = API_BY_NAME[NATIVE].parse(native, "v1alpha2")
    assert "at most 1 item" in str(resolve(group.topology, [CLUSTER]))


# --- the choice ------------------------------------------------------------------------------


def _tree(free: list[int]) -> tuple[Any, np.ndarray]:
    """2 blocks x 2 racks x 2 hosts; ``free[i]``: members host i can take."""
    facts = []
    for i in range(8):
        node = make_node(f"h{i}", labels={BLOCK: f"b{i // 4}", RACK: f"r{(i % 4) // 2}"})
        facts.append(node_facts(node))
    return NodeDomains(facts).tree(LEVELS), np.array(free, dtype=np.int64)


def _leaves(tree: Any, chosen: Chosen | Missed) -> dict[str, int]:
    assert isinstance(chosen, Chosen), chosen
    return {tree.values[2][leaf][2]: n for leaf, n in chosen.leaves}


def test_best_fit_takes_the_tightest_domain() -> None:
    tree, free = _tree([2, 2, 2, 1, 2, 2, 2, 2])  # rack b0/r1 holds 3, every other 4
    racks = TopologyConstraint("t", LEVELS, required=1)
    assert _leaves(tree, choose(tree, free, 3, racks)) == {"h2": 2, "h3": 1}
    assert _leaves(tree, choose(tree, free, 4, racks)) == {"h0": 2, "h1": 2}
    missed = choose(tree, free, 5, racks)
    assert isinstance(missed, Missed) and (missed.fits, missed.need) == (4, 5)
    assert missed.message == "required rack: the best rack fits 4 of 5 members"


def test_a_preferred_level_climbs_and_never_past_the_required_one() -> None:
    tree, free = _tree([1] * 8)
    preferred = TopologyConstraint("t", LEVELS, preferred=1)
    spread = choose(tree, free, 6, preferred)  # no rack holds 6, a block 4: both blocks
    assert isinstance(spread, Chosen) and spread.level == 0 and len(spread.domains) == 2
    held = TopologyConstraint("t", LEVELS, required=0, preferred=1)
    missed = choose(tree, free, 6, held)
    assert (
        isinstance(missed, Missed)
        and "required block: the best block fits 4 of 6" in missed.message
    )


def test_a_gang_with_placed_members_stays_in_their_domain() -> None:
    tree, free = _tree([1] * 8)
    racks = TopologyConstraint("t", LEVELS, required=1)
    rack_b1_r1 = tree.ids[1][6]
    assert _leaves(tree, choose(tree, free, 2, racks, within=int(rack_b1_r1))) == {"h6": 1, "h7": 1}
    assert isinstance(choose(tree, free, 3, racks, within=int(rack_b1_r1)), Missed)


def test_slices_are_completed_inside_the_domain_they_began_in() -> None:
    tree, free = _tree([1, 1, 0, 1, 1, 1, 1, 1])
    sliced = TopologyConstraint("t", LEVELS, required=0, slice_level=1, slice_size=2)
    # one member already runs in rack b0/r1 (on h2): its slice needs h3, then one whole rack
    held = {int(tree.ids[1][2]): 1}
    chosen = choose(tree, free, 3, sliced, within=0, held=held)
    assert _leaves(tree, chosen) == {"h3": 1, "h0": 1, "h1": 1}
    free[3] = 0  # no room left in b0/r1: the slice cannot be completed
    missed = choose(tree, free, 3, sliced, within=0, held=held)
    assert (
        isinstance(missed, Missed)
        and "the slice in rack b0/r1 has 1 of 2 members" in missed.message
    )


def test_nodes_without_a_level_label_are_outside_the_tree_and_counted() -> None:
    facts = [node_facts(make_node("h0", labels={BLOCK: "b0", RACK: "r0"}))]
    facts.append(node_facts(make_node("h1", labels={BLOCK: "b0"})))
    tree = NodeDomains(facts).tree(LEVELS)
    assert list(tree.ids[0]) == [0, -1] and tree.unlabelled == {BLOCK: 0, RACK: 1, HOST: 0}


# --- Volcano: HyperNodes and networkTopology -------------------------------------------------


def _hypernode(name: str, tier: int, members: list[Any], tier_name: str = "") -> HyperNode:
    spec: dict[str, Any] = {"tier": tier, "members": members}
    if tier_name:
        spec["tierName"] = tier_name
    return parse_hypernode({"metadata": {"name": name}, "spec": spec})


def _node(kind: str, how: str, value: Any) -> dict[str, Any]:
    body = {"exactMatch": {"name": value}, "regexMatch": {"pattern": value}}.get(how, value)
    return {"type": kind, "selector": {how: body}}


def test_hypernode_membership_by_name_pattern_labels_and_tiers() -> None:
    facts = [
        node_facts(make_node(f"gpu-{i}", labels={"pool": "a" if i < 2 else "b"})) for i in range(5)
    ]
    racks = [
        _hypernode(
            "r0", 1, [_node("Node", "exactMatch", "gpu-0"), _node("Node", "exactMatch", "gpu-1")]
        ),
        _hypernode("r1", 1, [_node("Node", "regexMatch", "gpu-[23]")]),  # Go: found anywhere
        _hypernode("r2", 1, [_node("Node", "labelMatch", {"matchLabels": {"pool": "b"}})]),
        _hypernode("s0", 2, [_node("HyperNode", "regexMatch", "^r[01]$")], "spine"),
        _hypernode("s1", 2, [_node("HyperNode", "exactMatch", "r2")], "spine"),
    ]
    tiers = membership(racks, facts)
    # gpu-2 and gpu-3 match both r1 and r2: the first by name wins
    assert tiers[1] == {0: "r0", 1: "r0", 2: "r1", 3: "r1", 4: "r2"}
    assert tiers[2] == {0: "s0", 1: "s0", 2: "s0", 3: "s0", 4: "s1"}
    tree = NodeDomains(facts, hypernodes=tuple(racks)).tree((tier_key(2), tier_key(1)))
    assert [tree.values[1][d] for d in tree.ids[1]] == [
        ("s0", "r0"),
        ("s0", "r0"),
        ("s0", "r1"),
        ("s0", "r1"),
        ("s1", "r2"),
    ]


BAD_HYPERNODES = [
    ({"tier": -1, "members": []}, "spec.tier"),
    ({"tier": 1, "members": []}, "member must have at least one member"),
    (
        {
            "tier": 1,
            "members": [
                {
                    "type": "Node",
                    "selector": {"exactMatch": {"name": "a"}, "regexMatch": {"pattern": "b"}},
                }
            ],
        },
        "Only one of ExactMatch, RegexMatch, or LabelMatch can be specified",
    ),
    (
        {"tier": 1, "members": [{"type": "Node", "selector": {"regexMatch": {"pattern": "("}}}]},
        "member regexMatch pattern is invalid",
    ),
    (
        {"tier": 1, "members": [{"type": "Rack", "selector": {"exactMatch": {"name": "a"}}}]},
        ".type",
    ),
]


@pytest.mark.parametrize(("spec", "said"), BAD_HYPERNODES)
def test_bad_hypernodes_say_why_and_are_left_out(spec: dict[str, Any], said: str) -> None:
    bad = parse_hypernode({"metadata": {"name": "x"}, "spec": spec})
    assert bad.error is not None and said in bad.error
    assert membership([bad], [node_facts(make_node("a"))]) == {}


def _volcano(topology: Any, *hypernodes: HyperNode) -> Any:
    ask = volcano_ask({"networkTopology": topology})
    book = TopologyBook()
    book.set_hypernodes(hypernodes)
    return resolve([ask] if ask is not None else [], book.ordered())


def test_volcano_network_topology_resolves_over_the_tiers() -> None:
    rack = _hypernode("r0", 1, [_node("Node", "exactMatch", "a")], "rack")
    spine = _hypernode("s0", 2, [_node("HyperNode", "exactMatch", "r0")], "spine")
    hard1 = _volcano({"mode": "hard", "highestTierAllowed": 1}, rack, spine)
    assert (hard1.levels, hard1.required, hard1.preferred) == ((tier_key(2), tier_key(1)), 1, None)
    hard2 = _volcano({"highestTierName": "spine"}, rack, spine)  # mode defaults to hard
    assert (hard2.required, hard2.preferred) == (0, 1)
    soft = _volcano({"mode": "soft"}, rack, spine)
    assert (soft.required, soft.preferred) == (None, 1)
    assert "no HyperNode (topology.volcano.sh)" in _volcano({"mode": "hard"})
    assert "no HyperNode tier at or below 0" in _volcano({"highestTierAllowed": 0}, rack)
    assert "cannot be set at the same time" in _volcano(
        {"highestTierAllowed": 1, "highestTierName": "rack"}, rack
    )
    assert "Unsupported value" in _volcano({"mode": "strict"}, rack)


def test_volcano_sub_groups_become_slices_ordered_by_their_labels() -> None:
    rack = _hypernode("r0", 1, [_node("Node", "exactMatch", "a")], "rack")
    spine = _hypernode("s0", 2, [_node("HyperNode", "exactMatch", "r0")], "spine")
    book = TopologyBook()
    book.set_hypernodes([rack, spine])
    policy = {
        "subGroupSize": 4,
        "matchLabelKeys": ["replica"],
        "networkTopology": {"mode": "hard", "highestTierName": "rack"},
    }
    spec = {"networkTopology": {"highestTierName": "spine"}, "subGroupPolicy": [policy]}
    found = resolve([volcano_ask(spec)], book.ordered())  # type: ignore[list-item]
    assert isinstance(found, TopologyConstraint)
    assert (found.required, found.slice_level, found.slice_size) == (0, 1, 4)
    assert found.rank_labels == ("replica",)
    two = {"subGroupPolicy": [policy, policy]}
    assert "one policy per group" in str(resolve([volcano_ask(two)], book.ordered()))  # type: ignore[list-item]
    above = {
        "networkTopology": {"highestTierName": "rack"},
        "subGroupPolicy": [{**policy, "networkTopology": {"highestTierName": "spine"}}],
    }
    assert "above the group's" in str(resolve([volcano_ask(above)], book.ordered()))  # type: ignore[list-item]
    zero = {"subGroupPolicy": [{**policy, "subGroupSize": 0}]}
    assert "subGroupSize: expected >= 1" in str(resolve([volcano_ask(zero)], book.ordered()))  # type: ignore[list-item]


# --- the choice's invariants, on random clusters ---------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    free=st.lists(st.integers(0, 3), min_size=8, max_size=8),
    count=st.integers(1, 12),
    required=st.sampled_from([None, 0, 1]),
    preferred=st.sampled_from([None, 1, 2]),
    size=st.sampled_from([1, 2]),
)
def test_every_choice_holds_the_gang_within_capacity_and_its_required_domain(
    free: list[int], count: int, required: int | None, preferred: int | None, size: int
) -> None:
    """Whatever the capacities and the ask: a choice places exactly the gang (in whole slices),
    never more on a leaf than it holds, inside one domain of the required level and every slice
    inside one domain of its level; a miss means no domain of the required level could hold it."""
    if required is not None and preferred is not None and preferred < required:
        preferred = required
    tree, slots = _tree(free)
    ask = TopologyConstraint(
        "t",
        LEVELS,
        required=required,
        preferred=preferred if preferred != required else None,
        slice_level=1 if size > 1 else None,
        slice_size=size,
        unconstrained=required is None and preferred is None and size > 1,
    )
    count -= count % size or 0
    if count == 0:
        return
    chosen = choose(tree, slots, count, ask)
    if isinstance(chosen, Missed):
        if required is not None:
            per_domain = np.bincount(tree.ids[required], weights=slots // 1)
            assert all(c < count for c in per_domain) or size > 1
        return
    row_of = {int(tree.ids[2][row]): row for row in range(8)}  # a host is its own leaf here
    on_rows = {row_of[leaf]: n for leaf, n in chosen.leaves}
    assert sum(on_rows.values()) == count
    assert all(n <= slots[row] for row, n in on_rows.items())
    if required is not None:
        assert len({int(tree.ids[required][row]) for row in on_rows}) == 1
    if size > 1:
        per_rack: dict[int, int] = {}
        for row, n in on_rows.items():
            rack = int(tree.ids[1][row])
            per_rack[rack] = per_rack.get(rack, 0) + n
        assert all(n % size == 0 for n in per_rack.values())
