"""Job and StatefulSet controller stand-ins, and the garbage collection of their pods.

Gangs rarely arrive as bare pods: training runs are Indexed Jobs, MPI workers are StatefulSets.
On a real cluster kube-controller-manager turns those into pods; these stand-ins do the same for
the simulator, so the same manifests (``examples/``) run on both. ``SimCluster(controllers=True)``
(the default: real clusters have them) attaches them; like the kubelet stand-in they are
in-process store listeners that act on the event loop (``gang.sim.reconciler``), and they
create pods through the SimApi create path, so pod admission and defaulting apply exactly as to
a pod posted over HTTP.

Job controller (``batch/v1``):

- keeps ``min(parallelism, remaining completions)`` pods active, named ``{job}-{5 random}``
  (NonIndexed) or ``{job}-{index}-{5 random}`` (Indexed, one pod per index, with the
  ``batch.kubernetes.io/job-completion-index`` annotation and label, the ``JOB_COMPLETION_INDEX``
  env var and the hostname ``{job}-{index}``, as the real controller does); every pod carries the
  template's labels (the apiserver adds ``batch.kubernetes.io/job-name`` / ``job-name`` and
  ``batch.kubernetes.io/controller-uid`` / ``controller-uid`` to the template at creation) and a
  controller ownerReference to the Job;
- replaces a Failed pod at once (no back-off delay) until more than ``backoffLimit`` pods have
  failed, then marks the Job ``Failed`` (``BackoffLimitExceeded``) and deletes its active pods;
  marks it ``Complete`` when enough pods (or, Indexed, every index) succeeded;
- ``spec.suspend`` deletes active pods and creates none; keeps ``status`` (active, ready,
  succeeded, failed, terminating, completedIndexes, startTime, completionTime, conditions) in
  step with the pods.

StatefulSet controller (``apps/v1``):

- creates ``{sts}-{i}`` for i in ``range(replicas)`` (from ``spec.ordinals.start`` when set, as
  LeaderWorkerSet's worker sets do) with hostname ``{sts}-{i}`` and subdomain
  ``serviceName`` (so a headless Service gives stable DNS names), the labels
  ``statefulset.kubernetes.io/pod-name``, ``apps.kubernetes.io/pod-index`` and
  ``controller-revision-hash``; with ``podManagementPolicy: Parallel`` all at once, with the
  default ``OrderedReady`` one at a time, each only when every lower ordinal is Running and Ready
  — which is why a gang of StatefulSet pods needs ``Parallel``: the scheduler waits for the whole
  gang, the controller waits for the first pod, and neither moves;
- deletes pods above ``replicas`` and replaces pods that finished (Succeeded or Failed); keeps
  ``status`` (replicas, readyReplicas, availableReplicas, current/updated, revisions) in step.

Garbage collection: deleting a Job or StatefulSet deletes the pods it controls (background
cascading deletion; bound pods are deleted gracefully, so without a kubelet they stay
Terminating, as on a kubelet-free real cluster). ``propagationPolicy`` is not looked at: a real
server orphans the pods of a batch/v1 Job deleted without one (kubectl sends ``Background``).
Not simulated: pod failure policies, backoffLimitPerIndex, activeDeadlineSeconds,
ttlSecondsAfterFinished, the ``batch.kubernetes.io/job-tracking`` pod finalizer, rolling updates
of a StatefulSet's template, and PersistentVolumeClaims.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
from collections.abc import Iterable
from typing import Any

import orjson

from gang.sim.api import DeleteOptions, SimApi, rfc3339
from gang.sim.errors import ApiError
from gang.sim.pods import is_terminal
from gang.sim.reconciler import Reconciler, obj_key
from gang.sim.resources import ResourceType
from gang.sim.store import DELETED, Obj, ObjKey, StoredEvent

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
STS_POD_NAME = "statefulset.kubernetes.io/pod-name"
STS_POD_INDEX = "apps.kubernetes.io/pod-index"
REVISION_HASH = "controller-revision-hash"


class _Controller(Reconciler):
    """One workload kind: a work queue of owner keys, an owner-uid → pod index, and GC."""

    kind = ""
    component = ""

    def __init__(self, api: SimApi, rt: ResourceType) -> None:
        super().__init__(api)
        self.rt = rt
        self._pods = api.rt_pods.storage_key
        self._owned: dict[str, set[ObjKey]] = {}
        self._owners = self.queue(self._sync_key)

    def _seed(self) -> None:
        for pod in self.api.store.items(self._pods):
            self._index(pod, None)
        for owner in self.api.store.items(self.rt.storage_key):
            self._owners.add(obj_key(owner))

    # --- events and the work queue -------------------------------------------------------

    def _controller_ref(self, pod: Obj | None) -> dict[str, Any] | None:
        if pod is None:
            return None
        for ref in pod["metadata"].get("ownerReferences") or []:
            if (
                ref.get("controller")
                and ref.get("kind") == self.kind
                and ref.get("apiVersion") == self.rt.api_version
            ):
                return dict(ref)
        return None

    def _index(self, pod: Obj, prev: Obj | None, deleted: bool = False) -> str | None:
        """Keep the owner-uid index current; return the owner's name if the pod has one."""
        key = obj_key(pod)
        old = self._controller_ref(prev)
        if old is not None:
            self._owned.get(old["uid"], set()).discard(key)
        ref = self._controller_ref(pod)
        if ref is None:
            return old["name"] if old is not None else None
        if deleted:
            owned = self._owned.get(ref["uid"])
            if owned is not None:
                owned.discard(key)
                if not owned:
                    del self._owned[ref["uid"]]
        else:
            self._owned.setdefault(ref["uid"], set()).add(key)
        return str(ref["name"])

    def _on_event(self, storage_key: str, event: StoredEvent) -> None:
        if storage_key == self._pods:
            owner = self._index(event.obj, event.prev, deleted=event.type == DELETED)
            if owner is not None:
                self._owners.add((event.obj["metadata"].get("namespace", ""), owner))
        elif storage_key == self.rt.storage_key:
            if event.type == DELETED:
                uid = event.obj["metadata"].get("uid", "")
                self.loop.call_soon(self._collect, uid)
                self.drop_retry(obj_key(event.obj))
            else:
                self._owners.add(obj_key(event.obj))

    def _sync_key(self, key: ObjKey) -> None:
        owner = self.api.store.get(self.rt.storage_key, *key)
        if owner is not None and not owner["metadata"].get("deletionTimestamp"):
            self.sync(owner)

    def _collect(self, uid: str) -> None:
        """Garbage collection: delete the pods whose controller was the deleted object."""
        for ns, name in sorted(self._owned.pop(uid, set())):
            pod = self.api.store.get(self._pods, ns, name)
            ref = self._controller_ref(pod)
            if pod is None or ref is None or ref["uid"] != uid:
                continue
            self._delete_pod(pod)

    # --- helpers for sync ----------------------------------------------------------------

    def sync(self, owner: Obj) -> None:
        raise NotImplementedError

    def owned_pods(self, owner: Obj) -> list[Obj]:
        keys = self._owned.get(owner["metadata"]["uid"], set())
        found = (self.api.store.get(self._pods, *k) for k in sorted(keys))
        return [p for p in found if p is not None]

    def owner_reference(self, owner: Obj) -> dict[str, Any]:
        meta = owner["metadata"]
        return {
            "apiVersion": self.rt.api_version,
            "kind": self.kind,
            "name": meta["name"],
            "uid": meta["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def create_pod(self, owner: Obj, pod: Obj) -> bool:
        """Create through the API's create path; on refusal post FailedCreate and back off."""
        key = obj_key(owner)
        try:
            created = self.api.create(self.api.rt_pods, key[0], pod)
        except ApiError as err:
            self.event(owner, "Warning", "FailedCreate", f"Error creating: {err.message}")
            self.retry_later(self._owners, key)  # a later event on the owner also retries
            return False
        self.reset_backoff(key)  # it worked: the next failure backs off from 1 s again
        self.event(owner, "Normal", "SuccessfulCreate", self.created_message(owner, created))
        return True

    def created_message(self, owner: Obj, pod: Obj) -> str:
        return f"Created pod: {pod['metadata']['name']}"

    def _delete_pod(self, pod: Obj) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(ApiError):  # already gone
            self.api.delete(self.api.rt_pods, meta.get("namespace"), meta["name"], DeleteOptions())

    def delete_pods(self, owner: Obj, pods: Iterable[Obj]) -> None:
        for pod in pods:
            self._delete_pod(pod)
            self.event(
                owner, "Normal", "SuccessfulDelete", f"Deleted pod: {pod['metadata']['name']}"
            )

    def write_status(self, owner: Obj, status: dict[str, Any]) -> None:
        """A status-subresource write; an unchanged status is a no-op (no event, no loop)."""
        self.write(self.rt, {**owner, "status": status}, "status")  # None: deleted meanwhile

    def event(self, owner: Obj, kind: str, reason: str, message: str) -> None:
        self.post_event(
            owner, self.kind, self.rt.api_version, kind, reason, message, self.component
        )


class JobController(_Controller):
    kind = "Job"
    component = "job-controller"

    def __init__(self, api: SimApi) -> None:
        super().__init__(api, api.rt_jobs)

    def sync(self, job: Obj) -> None:
        spec = job.get("spec") or {}
        previous = job.get("status") or {}
        indexed = spec.get("completionMode") == "Indexed"
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        suspended = bool(spec.get("suspend"))
        pods = self.owned_pods(job)
        active = [p for p in pods if _active(p)]
        succeeded = [p for p in pods if _phase(p) == "Succeeded"]
        failed = [p for p in pods if _phase(p) == "Failed"]
        done_indexes = {
            i
            for p in succeeded
            if (i := _completion_index(p)) is not None and i < int(completions or 0)
        }
        conditions = list(previous.get("conditions") or [])
        finished = _finished(conditions)
        now = rfc3339(self.api.clock())
        completion_time = previous.get("completionTime")
        if finished is None:
            if indexed:
                complete = len(done_indexes) >= int(completions or 0)
            elif completions is not None:
                complete = len(succeeded) >= int(completions)
            else:  # no completions: done when any pod succeeded and the rest have finished
                complete = bool(succeeded) and not active
            if len(failed) > int(spec.get("backoffLimit", 6)):
                finished = "Failed"
                conditions.append(
                    _condition(
                        "Failed",
                        now,
                        "BackoffLimitExceeded",
                        "Job has reached the specified backoff limit",
                    )
                )
            elif complete:
                finished = "Complete"
                conditions.append(_condition("Complete", now))
                completion_time = now
            if finished is not None or suspended:
                self.delete_pods(job, active)
            elif indexed:
                busy = {_completion_index(p) for p in active}
                todo = [i for i in range(int(completions or 0)) if i not in done_indexes | busy]
                for index in todo[: max(0, parallelism - len(active))]:
                    if not self.create_pod(job, self._pod(job, index)):
                        break
            else:
                remaining = (
                    (0 if succeeded else parallelism)
                    if completions is None
                    else min(parallelism, int(completions) - len(succeeded))
                )
                for _ in range(max(0, remaining - len(active))):
                    if not self.create_pod(job, self._pod(job, None)):
                        break
        current = self.api.store.get(self.rt.storage_key, *obj_key(job))
        if current is None:
            return
        self.write_status(
            current,
            self._status(current, previous, conditions, completion_time, indexed, suspended),
        )

    def _status(
        self,
        job: Obj,
        previous: dict[str, Any],
        conditions: list[dict[str, Any]],
        completion_time: str | None,
        indexed: bool,
        suspended: bool,
    ) -> dict[str, Any]:
        pods = self.owned_pods(job)
        active = [p for p in pods if _active(p)]
        succeeded = [p for p in pods if _phase(p) == "Succeeded"]
        # fields in the Go struct's order; counters with omitempty are left out at zero
        status: dict[str, Any] = {}
        if conditions:
            status["conditions"] = conditions
        start = previous.get("startTime")
        if start is None and not suspended:
            start = rfc3339(self.api.clock())
        if start is not None:
            status["startTime"] = start
        if completion_time is not None:
            status["completionTime"] = completion_time
        counts = {
            "active": len(active),
            "succeeded": len(succeeded),
            "failed": sum(1 for p in pods if _phase(p) == "Failed"),
        }
        status.update({k: v for k, v in counts.items() if v})
        status["terminating"] = sum(
            1 for p in pods if p["metadata"].get("deletionTimestamp") and not is_terminal(p)
        )
        if indexed:
            done = sorted({i for p in succeeded if (i := _completion_index(p)) is not None})
            if done:
                status["completedIndexes"] = _intervals(done)
        status["uncountedTerminatedPods"] = {}
        status["ready"] = sum(1 for p in active if _ready(p))
        return status

    def _pod(self, job: Obj, index: int | None) -> Obj:
        name = job["metadata"]["name"]
        template = job["spec"].get("template") or {}
        t_meta = template.get("metadata") or {}
        labels = dict(t_meta.get("labels") or {})
        annotations = dict(t_meta.get("annotations") or {})
        spec = copy.deepcopy(template.get("spec") or {})
        generate = f"{name}-"
        if index is not None:
            generate = f"{name}-{index}-"
            labels[COMPLETION_INDEX] = str(index)
            annotations[COMPLETION_INDEX] = str(index)
            spec.setdefault("hostname", f"{name}-{index}"[:63].rstrip("-."))
            env = {
                "name": COMPLETION_INDEX_ENV,
                "valueFrom": {
                    "fieldRef": {
                        "apiVersion": "v1",
                        "fieldPath": f"metadata.annotations['{COMPLETION_INDEX}']",
                    }
                },
            }
            for list_name in ("initContainers", "containers"):
                for container in spec.get(list_name) or []:
                    current = container.setdefault("env", [])
                    if not any(e.get("name") == COMPLETION_INDEX_ENV for e in current):
                        current.append(env)
        meta: dict[str, Any] = {
            "generateName": generate,
            "labels": labels,
            "ownerReferences": [self.owner_reference(job)],
        }
        if annotations:
            meta["annotations"] = annotations
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


class StatefulSetController(_Controller):
    kind = "StatefulSet"
    component = "statefulset-controller"

    def __init__(self, api: SimApi) -> None:
        super().__init__(api, api.rt_statefulsets)

    def created_message(self, owner: Obj, pod: Obj) -> str:
        return (
            f"create Pod {pod['metadata']['name']} in StatefulSet "
            f"{owner['metadata']['name']} successful"
        )

    def sync(self, sts: Obj) -> None:
        name = sts["metadata"]["name"]
        spec = sts.get("spec") or {}
        replicas = int(spec.get("replicas", 1))
        # spec.ordinals.start (GA in 1.31): ordinals run start..start+replicas-1
        first = int((spec.get("ordinals") or {}).get("start") or 0)
        parallel = spec.get("podManagementPolicy") == "Parallel"
        pods = {p["metadata"]["name"]: p for p in self.owned_pods(sts)}
        # finished pods are replaced, pods above the replica count go (highest ordinal first)
        doomed = [
            p
            for p in pods.values()
            if not p["metadata"].get("deletionTimestamp")
            and (is_terminal(p) or not first <= _ordinal(name, p) < first + replicas)
        ]
        doomed.sort(key=lambda p: -_ordinal(name, p))
        self.delete_pods(sts, doomed)
        gone = {p["metadata"]["name"] for p in doomed if is_terminal(p)}
        for i in range(first, first + replicas):
            pod_name = f"{name}-{i}"
            pod = pods.get(pod_name)
            if pod is None or pod_name in gone:
                if self.api.store.get(self._pods, sts["metadata"]["namespace"], pod_name):
                    break  # the old pod is still terminating; recreate it once it is gone
                if not self.create_pod(sts, self._pod(sts, i)) or not parallel:
                    break
            elif not parallel and not (_phase(pod) == "Running" and _ready(pod)):
                break  # OrderedReady: the next ordinal waits for this one to be Running and Ready
        current = self.api.store.get(self.rt.storage_key, *obj_key(sts))
        if current is not None:
            self.write_status(current, self._status(current))

    def _status(self, sts: Obj) -> dict[str, Any]:
        pods = [p for p in self.owned_pods(sts) if not p["metadata"].get("deletionTimestamp")]
        ready = sum(1 for p in pods if _phase(p) == "Running" and _ready(p))
        revision = f"{sts['metadata']['name']}-{_revision(sts)}"
        status: dict[str, Any] = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(pods),
        }
        if ready:
            status["readyReplicas"] = ready
        if pods:
            status["currentReplicas"] = len(pods)
            status["updatedReplicas"] = len(pods)
        status["currentRevision"] = revision
        status["updateRevision"] = revision
        status["collisionCount"] = 0
        status["availableReplicas"] = ready
        return status

    def _pod(self, sts: Obj, ordinal: int) -> Obj:
        name = sts["metadata"]["name"]
        spec = sts.get("spec") or {}
        template = spec.get("template") or {}
        t_meta = template.get("metadata") or {}
        pod_name = f"{name}-{ordinal}"
        labels = {
            **(t_meta.get("labels") or {}),
            REVISION_HASH: f"{name}-{_revision(sts)}",
            STS_POD_NAME: pod_name,
            STS_POD_INDEX: str(ordinal),
        }
        pod_spec = copy.deepcopy(template.get("spec") or {})
        pod_spec["hostname"] = pod_name
        if spec.get("serviceName"):
            pod_spec["subdomain"] = spec["serviceName"]
        meta: dict[str, Any] = {
            "name": pod_name,
            "labels": labels,
            "ownerReferences": [self.owner_reference(sts)],
        }
        if t_meta.get("annotations"):
            meta["annotations"] = dict(t_meta["annotations"])
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}


class Controllers:
    """Every workload controller stand-in, started and stopped together."""

    def __init__(self, api: SimApi) -> None:
        self.jobs = JobController(api)
        self.statefulsets = StatefulSetController(api)

    def start(self) -> None:
        self.jobs.start()
        self.statefulsets.start()

    def stop(self) -> None:
        self.jobs.stop()
        self.statefulsets.stop()


def _phase(pod: Obj) -> str | None:
    phase = (pod.get("status") or {}).get("phase")
    return str(phase) if phase is not None else None


def _active(pod: Obj) -> bool:
    return not is_terminal(pod) and not pod["metadata"].get("deletionTimestamp")


def _ready(pod: Obj) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _completion_index(pod: Obj) -> int | None:
    raw = (pod["metadata"].get("annotations") or {}).get(COMPLETION_INDEX)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _ordinal(sts_name: str, pod: Obj) -> int:
    suffix = pod["metadata"]["name"].removeprefix(f"{sts_name}-")
    return int(suffix) if suffix.isdigit() else -1


def _finished(conditions: list[dict[str, Any]]) -> str | None:
    for c in conditions:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c["type"])
    return None


def _condition(type_: str, now: str, reason: str = "", message: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {
        "type": type_,
        "status": "True",
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


def _intervals(indexes: list[int]) -> str:
    """Sorted indexes as the Job API writes completedIndexes: ``1,3-5,7``."""
    parts: list[str] = []
    start = prev = indexes[0]
    for i in [*indexes[1:], None]:
        if i is not None and i == prev + 1:
            prev = i
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if i is not None:
            start = prev = i
    return ",".join(parts)


def _revision(sts: Obj) -> str:
    template = (sts.get("spec") or {}).get("template") or {}
    digest = hashlib.sha256(orjson.dumps(template, option=orjson.OPT_SORT_KEYS)).hexdigest()
    return digest[:10]
