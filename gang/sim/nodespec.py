"""Bulk node creation from a short spec, for tests, demos and what-if runs.

"100 nodes with 8 GPUs in 4 zones" should be one short string, not a page of YAML. A pool spec
is ``COUNT[:key=value,...]``; several pools are separated by ``;``. Keys:

- ``cpu``, ``memory``, ``pods``, ``ephemeral-storage``: allocatable quantities
  (defaults 32, 128Gi, 110, 100Gi);
- ``gpu``: ``nvidia.com/gpu`` count; ``res:NAME=QTY`` any other extended resource;
- ``zones``: spread nodes round-robin over N zones (label ``topology.kubernetes.io/zone``);
- ``blocks``, ``racks``: a two-level network topology: the pool's nodes in consecutive runs of
  N blocks (label :data:`BLOCK_LABEL`, values ``b0``...) of M racks each (:data:`RACK_LABEL`,
  ``r0``... in every block), as Kueue's and KAI's topology examples label them;
- ``prefix``: node name prefix (default ``node``; names are ``PREFIX-00001``...);
- ``label:KEY=VALUE``; ``taint:KEY=VALUE:EFFECT`` (or ``taint:KEY:EFFECT``);
- ``unschedulable``: cordoned nodes.

Example: ``100:gpu=8,zones=4;10:cpu=64,memory=512Gi,prefix=cpu,taint:dedicated=infra:NoSchedule``.
The same pools can be given as YAML/JSON (a list of ``NodePool`` objects).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from gang.models.quantity import QuantityError, parse_quantity

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
BLOCK_LABEL = "topology.example.com/block"
RACK_LABEL = "topology.example.com/rack"
GPU_RESOURCE = "nvidia.com/gpu"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


class NodeSpecError(ValueError):
    pass


class Taint(BaseModel):
    model_config = ConfigDict(extra="forbid")
    key: str
    value: str = ""
    effect: str

    @field_validator("effect")
    @classmethod
    def _effect(cls, effect: str) -> str:
        if effect not in TAINT_EFFECTS:
            raise ValueError(
                f"taint effect must be one of {', '.join(TAINT_EFFECTS)}, not {effect!r}"
            )
        return effect


class NodePool(BaseModel):
    """``count`` identical nodes; quantities are Kubernetes quantity strings."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    count: int = Field(ge=1, le=100_000)
    prefix: str = "node"
    cpu: str = "32"
    memory: str = "128Gi"
    pods: str = "110"
    ephemeral_storage: str = Field(default="100Gi", alias="ephemeral-storage")
    gpu: int = Field(default=0, ge=0)
    extended: dict[str, str] = Field(default_factory=dict)
    zones: int = Field(default=1, ge=1)
    #: a network topology: blocks, and racks per block (0: no such labels)
    blocks: int = Field(default=0, ge=0)
    racks: int = Field(default=0, ge=0)
    labels: dict[str, str] = Field(default_factory=dict)
    taints: list[Taint] = Field(default_factory=list)
    unschedulable: bool = False

    @field_validator("cpu", "memory", "pods", "ephemeral_storage")
    @classmethod
    def _quantity(cls, value: str) -> str:
        try:
            if parse_quantity(value) < 0:
                raise ValueError(f"quantity must not be negative: {value}")
        except QuantityError as err:
            raise ValueError(str(err)) from None
        return value

    @field_validator("extended")
    @classmethod
    def _extended(cls, values: dict[str, str]) -> dict[str, str]:
        for value in values.values():
            cls._quantity(value)
        return values

    def allocatable(self) -> dict[str, str]:
        out = {
            "cpu": self.cpu,
            "memory": self.memory,
            "pods": self.pods,
            "ephemeral-storage": self.ephemeral_storage,
        }
        if self.gpu:
            out[GPU_RESOURCE] = str(self.gpu)
        out.update(self.extended)
        return out


def _topology_labels(pool: NodePool, i: int) -> dict[str, str]:
    """Node ``i``'s block and rack: consecutive nodes share a rack, consecutive racks a block."""
    labels: dict[str, str] = {}
    blocks = max(1, pool.blocks)
    per_block = -(-pool.count // blocks)
    if pool.blocks:
        labels[BLOCK_LABEL] = f"b{i // per_block}"
    if pool.racks:
        per_rack = -(-per_block // pool.racks)
        labels[RACK_LABEL] = f"r{(i % per_block) // per_rack}"
    return labels


def parse_pool(text: str) -> NodePool:
    """One ``COUNT[:key=value,...]`` pool."""
    text = text.strip()
    head, _, rest = text.partition(":")
    try:
        fields: dict[str, Any] = {"count": int(head)}
    except ValueError:
        raise NodeSpecError(
            f"node pool {text!r} must start with a node count, e.g. '100:gpu=8'"
        ) from None
    labels: dict[str, str] = {}
    extended: dict[str, str] = {}
    taints: list[dict[str, str]] = []
    for item in filter(None, (p.strip() for p in rest.split(","))):
        if item == "unschedulable":
            fields["unschedulable"] = True
            continue
        kind, sep, body = item.partition(":")
        if sep and kind in ("label", "taint", "res"):
            if kind == "taint":
                key_value, _, effect = body.rpartition(":")
                key, _, value = key_value.partition("=")
                if not key or not effect:
                    raise NodeSpecError(f"taint {body!r} must be KEY[=VALUE]:EFFECT")
                taints.append({"key": key, "value": value, "effect": effect})
                continue
            key, eq, value = body.partition("=")
            if not eq or not key:
                raise NodeSpecError(f"{kind} {body!r} must be KEY=VALUE")
            (labels if kind == "label" else extended)[key] = value
            continue
        key, eq, value = item.partition("=")
        if not eq:
            raise NodeSpecError(f"node pool option {item!r} must be key=value")
        fields[key.replace("-", "_")] = value
    fields.update(labels=labels, extended=extended, taints=taints)
    try:
        return NodePool.model_validate(fields)
    except ValueError as err:
        raise NodeSpecError(f"node pool {text!r}: {err}") from None


def parse_pools(spec: str) -> list[NodePool]:
    """Several pools separated by ``;``. Prefixes must differ so node names stay unique."""
    pools = [parse_pool(part) for part in spec.split(";") if part.strip()]
    prefixes = [p.prefix for p in pools]
    if len(set(prefixes)) != len(prefixes):
        taken = {prefix for prefix in prefixes if prefixes.count(prefix) == 1}
        for i, pool in enumerate(pools):
            if prefixes.count(pool.prefix) > 1:
                n = i
                while f"{pool.prefix}{n}" in taken:  # e.g. "1:prefix=node1;1;1"
                    n += 1
                taken.add(f"{pool.prefix}{n}")
                pools[i] = pool.model_copy(update={"prefix": f"{pool.prefix}{n}"})
    return pools


def node_objects(pools: list[NodePool]) -> list[dict[str, Any]]:
    """Node objects as a kubelet would register them, Ready, with capacity = allocatable."""
    nodes: list[dict[str, Any]] = []
    address = 0
    for pool in pools:
        allocatable = pool.allocatable()
        for i in range(pool.count):
            name = f"{pool.prefix}-{i:05d}"
            zone = f"zone-{i % pool.zones}"
            address += 1
            labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                ZONE_LABEL: zone,
                REGION_LABEL: "region-0",
                **_topology_labels(pool, i),
                **pool.labels,
            }
            spec: dict[str, Any] = {}
            if pool.taints:
                spec["taints"] = [t.model_dump() for t in pool.taints]
            if pool.unschedulable:
                spec["unschedulable"] = True
            nodes.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels},
                    "spec": spec,
                    "status": {
                        "capacity": dict(allocatable),
                        "allocatable": dict(allocatable),
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "True",
                                "reason": "KubeletReady",
                                "message": "kubelet is posting ready status",
                            }
                        ],
                        "addresses": [
                            {
                                "type": "InternalIP",
                                "address": f"10.{(address >> 16) & 255}.{(address >> 8) & 255}.{address & 255}",
                            },
                            {"type": "Hostname", "address": name},
                        ],
                        "nodeInfo": {
                            "machineID": f"{address:032x}",
                            "systemUUID": f"sim-{address:08d}",
                            "bootID": f"boot-{address:08d}",
                            "kernelVersion": "simulated",
                            "osImage": "gang simulated node",
                            "containerRuntimeVersion": "sim://1.0",
                            "kubeletVersion": "v1.30.0-gang-sim",
                            "kubeProxyVersion": "",
                            "operatingSystem": "linux",
                            "architecture": "amd64",
                        },
                    },
                }
            )
    return nodes
