"""A kubelet stand-in: bound pods start, run for their declared time, finish, and go away.

Without kubelets a real cluster keeps bound pods ``Pending`` forever and never frees their
capacity, which is right for scheduler benchmarks but useless for simulating a queue of training
jobs. When enabled, this stand-in plays every node's kubelet:

- a pod bound to an existing node becomes ``Running`` (Ready, containers running) after
  ``start_delay`` seconds;
- a pod annotated ``gang.sim/run-seconds: "N"`` (N may be fractional) then finishes after N
  seconds: ``Succeeded``, or ``Failed`` if it is also annotated ``gang.sim/exit-code`` with a
  non-zero code;
- a pod whose ``spec.activeDeadlineSeconds`` passes first (counted from its start, as the real
  kubelet counts from ``status.startTime``) is ``Failed`` with reason ``DeadlineExceeded``: a
  scheduler that plans with declared run times must see what a real cluster does to a job that
  outlives its declaration;
- a pod being deleted gracefully is removed after ``min(grace, termination_delay)`` seconds;
- a pod with ``spec.resourceClaims`` starts only when every claim it names exists, is its own
  (when made from a template) and lists it in ``status.reservedFor`` (so is allocated), as the
  kubelet's DRA manager checks before it prepares the devices; otherwise it stays ``Pending``
  with a Warning ``FailedPrepareDynamicResources`` Event (upstream's words, one Event per
  distinct message) and is tried again when a claim in its namespace or the pod changes, and
  every ``dra_retry_seconds``. Devices are not prepared: a reserved claim is enough.

It is off by default in tests, so tests control lifecycles explicitly.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from gang.sim.api import SimApi, rfc3339
from gang.sim.reconciler import Reconciler, obj_key
from gang.sim.resourceclaims import (
    ClaimNameError,
    claim_name,
    is_reserved_for,
    not_for_pod,
    pod_claims,
)
from gang.sim.store import DELETED, Obj, StoredEvent

RUN_SECONDS = "gang.sim/run-seconds"
KUBELET_CONDITIONS = ("Initialized", "Ready", "ContainersReady", "PodScheduled")
EXIT_CODE = "gang.sim/exit-code"
#: what the real kubelet writes into a pod it ends at its ``activeDeadlineSeconds``
DEADLINE_REASON = "DeadlineExceeded"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
#: a container killed by the kubelet (SIGKILL: 128 + 9)
KILLED_EXIT_CODE = 137
#: the Event the kubelet posts when a pod's ResourceClaims are not ready for it
DRA_FAILED_REASON = "FailedPrepareDynamicResources"


@dataclass(slots=True)
class KubeletConfig:
    start_delay: float = 0.5
    termination_delay: float = 0.2
    #: how often a pod refused for its ResourceClaims is tried again (besides claim changes)
    dra_retry_seconds: float = 2.0


class Kubelet(Reconciler):
    """Attach to a SimApi's store; every action happens on the event loop via timers (one per
    pod, keyed by its (namespace, name)); no work queue."""

    def __init__(self, api: SimApi, config: KubeletConfig | None = None) -> None:
        super().__init__(api)
        self.config = config or KubeletConfig()
        self._storage = api.rt_pods.storage_key
        #: exact start instants by pod uid: ``status.startTime`` only has whole seconds
        self._started: dict[str, float] = {}
        claims = api.rt_resource_claims
        self._claims = claims.storage_key if claims is not None else None
        #: pods not started for their ResourceClaims → the last message posted about it
        self._refused: dict[tuple[str, str], str] = {}

    def _seed(self) -> None:
        for pod in list(self.api.store.items(self._storage)):
            self._consider(pod)

    def stop(self) -> None:
        super().stop()
        self._started.clear()
        self._refused.clear()

    def _on_event(self, storage_key: str, event: StoredEvent) -> None:
        if storage_key == self._claims:
            self._retry_refused(event.obj["metadata"].get("namespace", ""))
            return
        if storage_key != self._storage:
            return
        if event.type == DELETED:
            self._started.pop(event.obj["metadata"].get("uid", ""), None)
            key = obj_key(event.obj)
            self._refused.pop(key, None)
            self.cancel_timer(key)
            return
        self._consider(event.obj)

    def _consider(self, pod: Obj) -> None:
        """Decide the next step for a pod, at most one pending timer per pod."""
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or self.api.store.get(self.api.rt_nodes.storage_key, "", node) is None:
            return
        key = obj_key(pod)
        meta = pod["metadata"]
        phase = (pod.get("status") or {}).get("phase")
        if meta.get("deletionTimestamp"):
            delay = min(
                float(meta.get("deletionGracePeriodSeconds") or 0), self.config.termination_delay
            )
            self._set_timer(key, delay, self._finish_deletion, replace=True)
        elif phase == "Running":
            self._plan_end(key, pod)
        elif phase == "Pending" and key in self._refused:
            self._set_timer(key, 0.0, self._start, replace=True)  # its claims may be ready now
        elif key in self._timers:
            return
        elif phase == "Pending":
            self._set_timer(key, self.config.start_delay, self._start)

    def _plan_end(self, key: tuple[str, str], pod: Obj) -> None:
        """Time a Running pod's end: its run-seconds or its deadline, whichever comes first.

        ``activeDeadlineSeconds`` may be set or shortened on a running pod, so the end is
        re-planned on every change, and the timer replaced only when the instant moved.
        """
        run, deadline = _run_seconds(pod), _active_deadline(pod)
        if run is None and deadline is None:
            return
        started_at = self._started.get(pod["metadata"].get("uid", ""))
        age = (
            self.api.clock() - started_at
            if started_at is not None
            else _age(self.api, (pod.get("status") or {}).get("startTime"))
        )
        # a job that ends exactly at its deadline has succeeded
        if deadline is not None and (run is None or deadline < run):
            delay, action = max(0.0, deadline - age), self._deadline_exceeded
        else:
            assert run is not None
            delay, action = max(0.0, run - age), self._complete
        planned = self._timers.get(key)
        if planned is not None and abs(planned.when() - (self.loop.time() + delay)) < 0.01:
            return
        self._set_timer(key, delay, action, replace=True)

    def _set_timer(
        self, key: tuple[str, str], delay: float, action: Any, replace: bool = False
    ) -> None:
        self.call_later(key, delay, functools.partial(self._act, key, action), replace)

    def _act(self, key: tuple[str, str], action: Any) -> None:
        pod = self.api.store.get(self._storage, *key)
        if pod is not None:
            action(pod)

    def _write_status(self, pod: Obj, status: dict[str, Any]) -> None:
        self.api.store.commit(self._storage, {**pod, "status": status})

    # --- Dynamic Resource Allocation: the DRA manager's checks before a pod starts ---------

    def _retry_refused(self, namespace: str) -> None:
        """A claim changed: try the pods of its namespace that wait for their claims now."""
        for key in [k for k in self._refused if k[0] == namespace]:
            self._set_timer(key, 0.0, self._start, replace=True)

    def _claims_problem(self, pod: Obj) -> str | None:
        """Why the DRA manager would not prepare the pod's claims (its words), or None."""
        if self._claims is None:
            return None
        meta = pod["metadata"]
        for pod_claim in pod_claims(pod):
            try:
                name, check_owner = claim_name(pod, pod_claim)
            except ClaimNameError as err:
                return str(err)
            if name is None:
                continue
            claim = self.api.store.get(self._claims, meta.get("namespace", ""), name)
            if claim is None:
                return (
                    f'fetch ResourceClaim {name}: resourceclaims.resource.k8s.io "{name}" not found'
                )
            foreign = not_for_pod(pod, claim) if check_owner else None
            if foreign is not None:
                return foreign
            if not is_reserved_for(pod, claim):
                return (
                    f"pod {meta['name']} ({meta.get('uid')}) is not allowed to use ResourceClaim "
                    f"{name} ({claim['metadata'].get('uid')})"
                )
        return None

    def _refuse(self, pod: Obj, problem: str) -> None:
        """Keep the pod Pending: an Event (once per message), and a retry later."""
        key = obj_key(pod)
        message = f"Failed to prepare dynamic resources: prepare dynamic resources: {problem}"
        if self._refused.get(key) != message:
            self._post_event(pod, "Warning", DRA_FAILED_REASON, message)
        self._refused[key] = message
        self._set_timer(key, self.config.dra_retry_seconds, self._start, replace=True)

    def _post_event(self, pod: Obj, type_: str, reason: str, message: str) -> None:
        node = (pod.get("spec") or {}).get("nodeName") or ""
        self.post_event(pod, "Pod", "v1", type_, reason, message, "kubelet", host=node)

    # --- the pod lifecycle -------------------------------------------------------------------

    def _start(self, pod: Obj) -> None:
        if (pod.get("status") or {}).get("phase") != "Pending" or pod["metadata"].get(
            "deletionTimestamp"
        ):
            self._refused.pop(obj_key(pod), None)
            return
        problem = self._claims_problem(pod)
        if problem is not None:
            self._refuse(pod, problem)
            return
        self._refused.pop(obj_key(pod), None)
        started_at = self.api.clock()
        self._started[pod["metadata"].get("uid", "")] = started_at
        now = rfc3339(started_at)
        node = self.api.store.get(self.api.rt_nodes.storage_key, "", pod["spec"]["nodeName"]) or {}
        host_ip = next(
            (
                a.get("address")
                for a in (node.get("status") or {}).get("addresses") or []
                if a.get("type") == "InternalIP"
            ),
            "10.0.0.1",
        )
        status = dict(pod.get("status") or {})
        status.update(
            phase="Running",
            startTime=now,
            hostIP=host_ip,
            podIP=_pod_ip(pod),
            # the kubelet owns these; others (DisruptionTarget, readiness gates) are kept, as
            # the real kubelet's status manager keeps conditions it does not own
            conditions=[
                {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": now}
                for t in KUBELET_CONDITIONS
            ]
            + [
                c
                for c in status.get("conditions") or []
                if isinstance(c, dict) and c.get("type") not in KUBELET_CONDITIONS
            ],
            containerStatuses=[
                {
                    "name": c.get("name"),
                    "ready": True,
                    "restartCount": 0,
                    "started": True,
                    "image": c.get("image"),
                    "imageID": "",
                    "containerID": f"sim://{c.get('name')}",
                    "state": {"running": {"startedAt": now}},
                }
                for c in pod["spec"].get("containers") or []
            ],
        )
        self._write_status(pod, status)

    def _complete(self, pod: Obj) -> None:
        code = _exit_code(pod)
        self._terminate(pod, code, "Completed" if code == 0 else "Error")

    def _deadline_exceeded(self, pod: Obj) -> None:
        """The kubelet kills the containers and fails the pod (its phase says why, not a
        condition: DeadlineExceeded is no disruption)."""
        self._terminate(
            pod, KILLED_EXIT_CODE, "Error", reason=DEADLINE_REASON, message=DEADLINE_MESSAGE
        )

    def _terminate(
        self,
        pod: Obj,
        code: int,
        container_reason: str,
        reason: str | None = None,
        message: str | None = None,
    ) -> None:
        status = dict(pod.get("status") or {})
        if status.get("phase") != "Running":
            return
        now = rfc3339(self.api.clock())
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        if reason is not None:
            status["reason"] = reason
        if message is not None:
            status["message"] = message
        status["conditions"] = [
            {
                **c,
                "status": "False",
                "reason": "PodCompleted" if code == 0 else "PodFailed",
                "lastTransitionTime": now,
            }
            if c.get("type") in ("Ready", "ContainersReady")
            else c
            for c in status.get("conditions") or []
        ]
        status["containerStatuses"] = [
            {
                **cs,
                "ready": False,
                "started": False,
                "state": {
                    "terminated": {
                        "exitCode": code,
                        "reason": container_reason,
                        "startedAt": (cs.get("state") or {}).get("running", {}).get("startedAt"),
                        "finishedAt": now,
                    }
                },
            }
            for cs in status.get("containerStatuses") or []
        ]
        self._write_status(pod, status)

    def _finish_deletion(self, pod: Obj) -> None:
        if pod["metadata"].get("finalizers"):
            return  # a finalizer holds the object; the owner of the finalizer finishes it
        self.api.store.commit(self._storage, {**pod}, deleted=True)


def _annotation(pod: Obj, name: str) -> str | None:
    value = (pod["metadata"].get("annotations") or {}).get(name)
    return str(value) if value is not None else None


def _run_seconds(pod: Obj) -> float | None:
    raw = _annotation(pod, RUN_SECONDS)
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


def _active_deadline(pod: Obj) -> float | None:
    """``spec.activeDeadlineSeconds`` (a positive integer in the API; anything else is none)."""
    raw = (pod.get("spec") or {}).get("activeDeadlineSeconds")
    if isinstance(raw, bool) or not isinstance(raw, int | float) or raw <= 0:
        return None
    return float(raw)


def _exit_code(pod: Obj) -> int:
    raw = _annotation(pod, EXIT_CODE)
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 1


def _age(api: SimApi, timestamp: str | None) -> float:
    if not timestamp:
        return 0.0
    from datetime import datetime

    started = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    return max(0.0, api.clock() - started)


def _pod_ip(pod: Obj) -> str:
    h = abs(hash(pod["metadata"].get("uid", pod["metadata"]["name"])))
    return f"10.244.{(h >> 8) & 255}.{h & 255}"
