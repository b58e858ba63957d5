"""DeviceClasses, ResourceSlices and ResourceClaims: the devices of dynamic resource allocation.

Why this exists: a pod that asks for GPUs through ResourceClaims (``resource.k8s.io/v1``) can only
go where its claims can be allocated — devices published in ResourceSlices, chosen by the
DeviceClasses' and requests' selectors, not in use by any other claim. The DRA plugin
(``gang.scheduling.dra.plugin``) judges that on the hot path, so the informers' objects are read
here once into the frozen shapes of ``gang.models.dra`` and the catalog answers lookups by key.

The catalog also keeps what gang decided and has not yet seen written (``in_flight``): the
allocations of gangs reserved or being committed. Devices they take count as in use for every
other gang from the moment of Reserve, as kube-scheduler's in-flight allocations do, so two gangs
never plan on one device. An entry ends when the informer shows the claim allocated (the written
allocation is then the fact) or when its gang is unreserved.

Malformed objects are skipped with the reason kept (``rejected``): one odd slice must not blind
the scheduler to the others; a pod whose claim cannot be read waits with the reason.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from gang.models.dra import (
    DELETE_PROTECTION_FINALIZER,
    DRA_GROUP,
    DRA_VERSION,
    MAX_RESERVED_FOR,
    DeviceClass,
    DraParseError,
    ResourceClaim,
    ResourceSlice,
    parse_claim,
    parse_class,
    parse_slice,
)
from gang.state.catalog import KindCatalog, KindTable

Key = tuple[str, str]
#: (driver, pool, device)
DeviceId = tuple[str, str, str]

__all__ = [
    "CLAIMS",
    "CLASSES",
    "DELETE_PROTECTION_FINALIZER",
    "DRA_GROUP",
    "DRA_KINDS",
    "DRA_VERSION",
    "MAX_RESERVED_FOR",
    "SLICES",
    "DeviceId",
    "DraCatalog",
    "InFlight",
    "devices_of",
]

CLASSES: Final = "deviceclasses"
SLICES: Final = "resourceslices"
CLAIMS: Final = "resourceclaims"
DRA_KINDS: Final = (CLASSES, SLICES, CLAIMS)


@dataclass(slots=True)
class InFlight:
    """An allocation gang decided for a claim and has not yet seen written: the
    ``status.allocation`` JSON (None: the claim was allocated already, only consumers are
    added) and the member pods (key → uid) it is for."""

    allocation: Mapping[str, Any] | None
    pods: dict[Key, str] = field(default_factory=dict)


@dataclass
class DraCatalog(KindCatalog):
    """What the DRA informers hold, parsed (see the module docstring; the informers' side,
    ``upsert``/``remove``/``rejected``/``version``, is ``KindCatalog``'s)."""

    classes: dict[str, DeviceClass] = field(default_factory=dict)
    slices: dict[str, ResourceSlice] = field(default_factory=dict)
    claims: dict[Key, ResourceClaim] = field(default_factory=dict)
    #: claim → the allocation gang reserved for it and has not seen written yet
    in_flight: dict[Key, InFlight] = field(default_factory=dict)
    #: the API server serves ``resource.k8s.io/v1`` (else nothing here is ever filled)
    served: bool = False
    _in_use: tuple[int, frozenset[DeviceId]] | None = None

    def kinds(self) -> Mapping[str, KindTable]:
        return {
            CLASSES: KindTable(self.classes, parse_class, namespaced=False),
            SLICES: KindTable(self.slices, parse_slice, namespaced=False),
            CLAIMS: KindTable(self.claims, parse_claim, namespaced=True),
        }

    def parse_errors(self) -> tuple[type[Exception], ...]:
        return (DraParseError,)

    def stored(self, kind: str, value: Any) -> None:
        if kind == CLAIMS:
            self._written(value)

    def _written(self, claim: ResourceClaim) -> None:
        """The served claim carries what gang committed: the fact replaces the plan."""
        planned = self.in_flight.get(claim.key)
        if planned is None or claim.allocation is None:
            return
        if all(uid in claim.reserved_for for uid in planned.pods.values()):
            del self.in_flight[claim.key]

    # --- what is taken -----------------------------------------------------------------------

    def in_use(self, released: frozenset[Key] = frozenset()) -> frozenset[DeviceId]:
        """Every device an allocated claim holds (``adminAccess`` results excepted, as they
        share), and every device of an allocation in flight; ``released``: claims a trial
        takes to be gone (their consumers evicted)."""
        if not released and self._in_use is not None and self._in_use[0] == self.version:
            return self._in_use[1]
        taken: set[DeviceId] = set()
        for key, claim in self.claims.items():
            if key not in released:
                taken.update(devices_of(claim.allocation))
        for key, planned in self.in_flight.items():
            if key not in released:
                taken.update(devices_of(planned.allocation))
        found = frozenset(taken)
        if not released:
            self._in_use = (self.version, found)
        return found

    def allocation_of(
        self, key: Key, released: frozenset[Key] = frozenset()
    ) -> Mapping[str, Any] | None:
        """The claim's allocation: served, else the one in flight; None when it has none (or
        a trial takes it to be released)."""
        if key in released:
            return None
        claim = self.claims.get(key)
        if claim is not None and claim.allocation:
            return claim.allocation
        planned = self.in_flight.get(key)
        return planned.allocation if planned is not None else None

    def released_by(self, gone: Iterable[str]) -> frozenset[Key]:
        """The claims every consumer of which is among the pod uids ``gone`` (evicted in a
        preemption trial): the resourceclaim controller would deallocate them. Costs nothing
        where no claim exists (every trial of every preemption asks)."""
        if not (self.claims or self.in_flight):
            return frozenset()
        gone = set(gone)
        found = {
            key
            for key, claim in self.claims.items()
            if claim.reserved_for and set(claim.reserved_for) <= gone
        }
        found.update(
            key
            for key, planned in self.in_flight.items()
            if planned.pods and set(planned.pods.values()) <= gone
        )
        return frozenset(found)

    def every_claim(self) -> frozenset[Key]:
        """Every claim known or planned: on the empty cluster all of them are released."""
        return frozenset(self.claims) | frozenset(self.in_flight)

    def plan(self, key: Key, allocation: Mapping[str, Any] | None, pod: Key, uid: str) -> None:
        """Record that ``pod`` (a member just reserved) takes ``allocation`` of claim ``key``
        (None: the claim is allocated already)."""
        planned = self.in_flight.get(key)
        if planned is None:
            planned = self.in_flight[key] = InFlight(allocation)
        elif planned.allocation is None and allocation is not None:
            planned.allocation = allocation
        planned.pods[pod] = uid
        self.version += 1

    def unplan(self, pod: Key) -> None:
        """Forget every in-flight entry of ``pod`` (its reservation ended)."""
        for key in [k for k, planned in self.in_flight.items() if pod in planned.pods]:
            planned = self.in_flight[key]
            del planned.pods[pod]
            if not planned.pods:
                del self.in_flight[key]
            self.version += 1


def devices_of(allocation: Mapping[str, Any] | None) -> list[DeviceId]:
    """The devices an allocation (``status.allocation`` JSON) holds, admin access excepted."""
    if not allocation:
        return []
    results = (allocation.get("devices") or {}).get("results") or []
    return [
        (str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
        for r in results
        if isinstance(r, Mapping) and not r.get("adminAccess")
    ]
