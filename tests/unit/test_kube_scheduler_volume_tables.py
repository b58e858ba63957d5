"""kube-scheduler's VolumeBinding, VolumeZone and NodeVolumeLimits test tables, reproduced.

Cases where gang differs on purpose, or where the Go test checks something gang does not model
(see ``DIFFERENT``), must still differ (strict xfail), so the list stays true."""

from __future__ import annotations

from typing import Any

import pytest

from gang.scheduling.volumes import NodeVolumeLimits, VolumeBinding, VolumeZone
from tests.unit.kube_scheduler_tables import check_volumes, load

CASES = load("volumes.yaml")
PLUGINS = {
    "VolumeBinding": VolumeBinding,
    "VolumeZone": VolumeZone,
    "NodeVolumeLimits": NodeVolumeLimits,
}

#: case id → why gang's answer differs from kube-scheduler's test expectation
DIFFERENT: dict[str, str] = {}
_MIGRATION = (
    "gang does not translate in-tree volumes (awsElasticBlockStore, ...) to CSI drivers; a pod "
    "with such an inline volume is refused as unsupported instead"
)
_LIMITS = "NodeVolumeLimits/TestCSILimits/"
for _name in (
    "should count in-tree volumes if migration is enabled",
    "should count unbound in-tree volumes if migration is enabled",
    "should count in-tree inline volumes if migration is enabled",
    "should count in-tree and csi volumes if migration is enabled (when scheduling in-tree volumes)",
    "should count in-tree, inline and csi volumes if migration is enabled (when scheduling in-tree "
    "volumes)",
    "should count in-tree and csi volumes if migration is enabled (when scheduling csi volumes)",
    "don't skip Filter when the pod has inline migratable volumes",
):
    DIFFERENT[_LIMITS + _name] = _MIGRATION
DIFFERENT[_LIMITS + "should count VolumeAttachments towards volume limit when no pods exist"] = (
    "gang counts the volumes of the pods on a node, not VolumeAttachment objects (it does not "
    "watch them)"
)
for _name in ("ephemeral volume missing", "don't skip Filter when the pod has ephemeral volumes"):
    DIFFERENT[_LIMITS + _name] = (
        "a missing claim is refused once, by VolumeBinding's PreFilter "
        "('persistentvolumeclaim \"abc-xyz\" not found'), not again by NodeVolumeLimits per node"
    )
DIFFERENT[_LIMITS + "ephemeral volume not owned"] = (
    "gang does not check that a generic ephemeral volume's claim is owned by the pod"
)
for _name in (
    "unbound volume empty storage class",
    "unbound volume no storage class",
    "unbound volume immediate binding mode",
):
    DIFFERENT["VolumeZone/TestWithBinding/" + _name] = (
        "an unbound claim that is not WaitForFirstConsumer is refused by VolumeBinding's "
        "PreFilter (unbound immediate claim, or storage class not found), which runs before "
        "VolumeZone in kube-scheduler too; VolumeZone itself passes it"
    )
DIFFERENT[
    "VolumeBinding/TestFindPodVolumesWithProvisioning/one-provisioned (CSIDriver with capacity "
    "tracking)"
] = "gang does not read CSIStorageCapacity: a provisioner's free capacity is not checked"


def _params() -> list[Any]:
    out = []
    for case in CASES:
        marks = (
            [pytest.mark.xfail(strict=True, reason=DIFFERENT[case["id"]])]
            if case["id"] in DIFFERENT
            else []
        )
        out.append(pytest.param(case, id=case["id"], marks=marks))
    return out


@pytest.mark.parametrize("case", _params())
def test_volume_plugin(case: dict[str, Any]) -> None:
    check_volumes(case, PLUGINS[case["plugin"]]())
