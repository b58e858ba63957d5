"""The kube-scheduler extender protocol's messages, as kube-scheduler encodes and decodes them.

kube-scheduler sends and reads the Go structs of ``k8s.io/kube-scheduler/extender/v1`` with
``encoding/json``. Since Kubernetes 1.16 those structs carry **no json tags**, so on the wire
the keys are the Go field names (``Pod``, ``Nodes``, ``NodeNames``, ``FailedNodes``, ``Host``,
``PodName``, ...), every field is written (no ``omitempty``: a nil pointer, slice or map is
``null``), and maps come with sorted keys. The tagged structs of Kubernetes ≤ 1.15
(``pkg/scheduler/api/v1``) used lower-case keys (``pod``, ``nodes``, ``nodenames``,
``failedNodes``, ``error``, ``host``, ``score``) for the filter/prioritize messages; the binding
messages were never tagged.

Go's decoder matches keys case-insensitively (an exact match preferred), which is what lets one
extender serve both generations. These models do the same when reading — ``Pod``, ``pod`` and
``POD`` are all the pod, a later duplicate key wins, and a ``null`` is the same as an absent
key (a nil pointer) — and write what the current kube-scheduler writes: the Go field names,
every field present. Unknown keys are ignored, as Go ignores them.

The pod and the node objects stay raw JSON dicts: gang parses what it needs once
(``gang.state.podinfo.parse_pod``, ``ClusterCache.upsert_node``), and a filter answer echoes the
passing node objects back exactly as they came.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

#: kube-scheduler's bounds on an extender's prioritize score (extender/v1 MaxExtenderPriority)
MIN_EXTENDER_PRIORITY = 0
MAX_EXTENDER_PRIORITY = 10

Obj = dict[str, Any]


class GoJSON(BaseModel):
    """A message decoded the way Go's ``encoding/json`` decodes a struct without tags."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True, frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _go_keys(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data  # pydantic reports the wrong type
        aliases = {(field.alias or name): name for name, field in cls.model_fields.items()}
        folded = {alias.casefold(): alias for alias in aliases}
        out: dict[str, Any] = {}
        for key, value in data.items():
            if not isinstance(key, str):
                continue
            alias = key if key in aliases else folded.get(key.casefold())
            if alias is None:
                continue  # unknown field: ignored, as Go does
            if value is None:
                out.pop(alias, None)  # null is a nil pointer / slice / map: as if absent
            else:
                out[alias] = value
        return out

    def wire(self) -> Obj:
        """The JSON object kube-scheduler's ``json.Marshal`` would produce for this struct."""
        return self.model_dump(by_alias=True)


class NodeList(GoJSON):
    """``v1.NodeList``: tagged (``metadata``, ``items``); the items stay raw node objects."""

    metadata: Obj = Field(default_factory=dict, alias="metadata")
    items: list[Obj] = Field(default_factory=list, alias="items")


class ExtenderArgs(GoJSON):
    """What kube-scheduler POSTs to the filter and prioritize verbs.

    ``Nodes`` (full node objects) when the extender is configured with ``nodeCacheCapable:
    false``, ``NodeNames`` when ``true``; kube-scheduler sends the other one as ``null``.
    """

    pod: Obj = Field(alias="Pod")
    nodes: NodeList | None = Field(default=None, alias="Nodes")
    node_names: list[str] | None = Field(default=None, alias="NodeNames")

    @model_validator(mode="after")
    def _some_nodes(self) -> ExtenderArgs:
        if self.nodes is None and self.node_names is None:
            raise ValueError("one of Nodes or NodeNames is required")
        return self


class ExtenderFilterResult(GoJSON):
    """The filter verb's answer. kube-scheduler reads ``NodeNames`` when it is configured with
    ``nodeCacheCapable: true`` (and it is not null), else ``Nodes``; a node named in
    ``FailedAndUnresolvableNodes`` is one preemption cannot help. A non-empty ``Error`` fails
    the filter (or, with ``ignorable: true``, makes kube-scheduler skip this extender)."""

    nodes: NodeList | None = Field(default=None, alias="Nodes")
    node_names: list[str] | None = Field(default=None, alias="NodeNames")
    failed_nodes: dict[str, str] | None = Field(default=None, alias="FailedNodes")
    failed_and_unresolvable_nodes: dict[str, str] | None = Field(
        default=None, alias="FailedAndUnresolvableNodes"
    )
    error: str = Field(default="", alias="Error")


class HostPriority(GoJSON):
    """One entry of the prioritize verb's answer (a JSON array of these: HostPriorityList)."""

    host: str = Field(alias="Host")
    score: int = Field(alias="Score", ge=MIN_EXTENDER_PRIORITY, le=MAX_EXTENDER_PRIORITY)


class ExtenderBindingArgs(GoJSON):
    """What kube-scheduler POSTs to the bind verb (never tagged, in any version)."""

    pod_name: str = Field(alias="PodName", min_length=1)
    pod_namespace: str = Field(alias="PodNamespace", min_length=1)
    pod_uid: str = Field(default="", alias="PodUID")
    node: str = Field(alias="Node", min_length=1)


class ExtenderBindingResult(GoJSON):
    """The bind verb's answer: an empty ``Error`` means bound."""

    error: str = Field(default="", alias="Error")


def describe(err: ValidationError) -> str:
    """One line naming the offending field(s) by their wire names, e.g. ``Pod: required``."""
    parts = []
    for item in err.errors(include_url=False):
        where = ".".join(str(p) for p in item.get("loc", ()))
        message = str(item.get("msg", "invalid"))
        if item.get("type") == "missing":
            message = "required field missing"
        message = message.removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)
