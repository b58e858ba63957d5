"""What a kube-apiserver does to Jobs, StatefulSets and Services on the way in.

The controller stand-ins (``gang.sim.controllers``) read these objects as the server stored them,
so the server-side facts they rely on are reproduced here: a Job gets its generated selector and
the ``batch.kubernetes.io/controller-uid`` / ``job-name`` labels on its pod template (which is why
every pod of a Job carries them), Job and StatefulSet specs get their defaults (parallelism,
completionMode, backoffLimit, podManagementPolicy, ...), and status starts empty. Validation covers
what users hit in practice: a Job's restartPolicy must be ``Never`` or ``OnFailure``, an Indexed
Job needs ``completions``, a StatefulSet needs a selector that matches its template's labels.
Updates are not re-validated (selector and template immutability are not enforced).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]

JOB_CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
JOB_NAME = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID = "controller-uid"
LEGACY_JOB_NAME = "job-name"
DEFAULT_BACKOFF_LIMIT = 6


class WorkloadRejected(Exception):
    """An object the apiserver would refuse with 422 Invalid; ``causes`` are (field, message)."""

    def __init__(self, causes: list[tuple[str, str]]) -> None:
        super().__init__(str(causes))
        self.causes = causes


def _supported(value: Any, allowed: tuple[str, ...]) -> str:
    listed = ", ".join(f'"{a}"' for a in allowed)
    return f'Unsupported value: "{value}": supported values: {listed}'


def _template(spec: Obj) -> tuple[Obj, Obj, Obj]:
    """Copies of (template, template.metadata, template.spec), ready to modify."""
    template = dict(spec.get("template") or {})
    meta = dict(template.get("metadata") or {})
    pod_spec = dict(template.get("spec") or {})
    return template, meta, pod_spec


def admit_job(job: Obj) -> Obj:
    """batch/v1 Job: SetDefaults_Job, the strategy's generated selector, validation."""
    meta = job["metadata"]
    spec = dict(job.get("spec") or {})
    if spec.get("parallelism") is None and spec.get("completions") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("backoffLimit", DEFAULT_BACKOFF_LIMIT)
    spec.setdefault("suspend", False)
    spec.setdefault("podReplacementPolicy", "TerminatingOrFailed")
    template, t_meta, pod_spec = _template(spec)
    pod_spec.setdefault("restartPolicy", "Always")
    if not spec.get("manualSelector"):
        # the Job strategy's generateSelector: a selector on the Job's uid, and its labels on
        # the template, so every pod the controller creates carries them
        uid = meta["uid"]
        spec["selector"] = {"matchLabels": {JOB_CONTROLLER_UID: uid}}
        t_meta["labels"] = {
            **(t_meta.get("labels") or {}),
            JOB_CONTROLLER_UID: uid,
            JOB_NAME: meta["name"],
            LEGACY_CONTROLLER_UID: uid,
            LEGACY_JOB_NAME: meta["name"],
        }
    spec["template"] = {**template, "metadata": t_meta, "spec": pod_spec}
    causes: list[tuple[str, str]] = []
    for name in ("parallelism", "completions", "backoffLimit"):
        value = spec.get(name)
        if value is not None and (not isinstance(value, int) or value < 0):
            causes.append(
                (f"spec.{name}", f'Invalid value: "{value}": must be greater than or equal to 0')
            )
    mode = spec["completionMode"]
    if mode not in ("NonIndexed", "Indexed"):
        causes.append(("spec.completionMode", _supported(mode, ("NonIndexed", "Indexed"))))
    if mode == "Indexed" and spec.get("completions") is None:
        causes.append(("spec.completions", "Required value: when completion mode is Indexed"))
    restart = pod_spec["restartPolicy"]
    if restart not in ("OnFailure", "Never"):
        causes.append(
            ("spec.template.spec.restartPolicy", _supported(restart, ("OnFailure", "Never")))
        )
    if causes:
        raise WorkloadRejected(causes)
    return {**job, "spec": spec, "status": {}}


def admit_statefulset(sts: Obj) -> Obj:
    """apps/v1 StatefulSet: SetDefaults_StatefulSet and the selector/template validation."""
    spec = dict(sts.get("spec") or {})
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}})
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault(
        "persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"}
    )
    template, t_meta, pod_spec = _template(spec)
    pod_spec.setdefault("restartPolicy", "Always")
    spec["template"] = {**template, "metadata": t_meta, "spec": pod_spec}
    causes: list[tuple[str, str]] = []
    replicas = spec["replicas"]
    if not isinstance(replicas, int) or replicas < 0:
        causes.append(
            ("spec.replicas", f'Invalid value: "{replicas}": must be greater than or equal to 0')
        )
    policy = spec["podManagementPolicy"]
    if policy not in ("OrderedReady", "Parallel"):
        causes.append(
            ("spec.podManagementPolicy", _supported(policy, ("OrderedReady", "Parallel")))
        )
    selector = spec.get("selector")
    if not isinstance(selector, dict) or not (
        selector.get("matchLabels") or selector.get("matchExpressions")
    ):
        causes.append(("spec.selector", "Required value"))
    elif not selector_matches(selector, t_meta.get("labels") or {}):
        causes.append(
            (
                "spec.template.metadata.labels",
                f"Invalid value: {t_meta.get('labels') or {}}: `selector` does not match "
                "template `labels`",
            )
        )
    if pod_spec["restartPolicy"] != "Always":
        causes.append(
            ("spec.template.spec.restartPolicy", _supported(pod_spec["restartPolicy"], ("Always",)))
        )
    if causes:
        raise WorkloadRejected(causes)
    return {**sts, "spec": spec, "status": {"replicas": 0, "availableReplicas": 0}}


def admit_service(svc: Obj) -> Obj:
    """core/v1 Service: type, session affinity, port protocol/targetPort, a cluster IP."""
    spec = dict(svc.get("spec") or {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    ports = []
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port = {"protocol": "TCP", **port}
            port.setdefault("targetPort", port.get("port"))
        ports.append(port)
    if ports:
        spec["ports"] = ports
    headless = spec.get("clusterIP") == "None"
    if not ports and not headless:
        raise WorkloadRejected([("spec.ports", "Required value")])
    if not spec.get("clusterIP"):
        digest = hashlib.sha256(svc["metadata"]["uid"].encode()).digest()
        spec["clusterIP"] = f"10.96.{digest[0]}.{max(1, digest[1])}"
    spec.setdefault("clusterIPs", [spec["clusterIP"]])
    spec.setdefault("ipFamilies", ["IPv4"])
    spec.setdefault("ipFamilyPolicy", "SingleStack")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    return {**svc, "spec": spec, "status": {"loadBalancer": {}}}


def selector_matches(selector: Mapping[str, Any], labels: Mapping[str, Any]) -> bool:
    """A metav1.LabelSelector (matchLabels and matchExpressions) against a label map."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op = expr.get("key"), expr.get("operator")
        values = expr.get("values") or []
        present = key in labels
        if (
            (op == "In" and (not present or labels[key] not in values))
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True
