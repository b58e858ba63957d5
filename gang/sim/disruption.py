"""PodDisruptionBudgets for the simulator: the ``pods/eviction`` subresource and the PDB controller.

A scheduler that preempts whole gangs must not tear down a workload below what its owners said it
can bear, and on a real cluster the place where that promise is kept is the Eviction API: a POST
to ``pods/{name}/eviction`` is checked against the PodDisruptionBudget that selects the pod and
answered 201 (the pod is deleted gracefully), 429 (the budget allows no disruption now) or 500
(more than one budget selects the pod). That check only reads what kube-controller-manager's
disruption controller wrote into the budget's status, so both halves live here, as in a real
cluster: ``evict`` is kube-apiserver's ``pkg/registry/core/pod/storage/eviction.go`` (same order
of checks, same Status bodies), and ``DisruptionController`` is the disruption controller's
status bookkeeping.

The eviction handler, as in a v1.30 apiserver:

- a pod that is Pending (bound or not), Succeeded, Failed or already being deleted is deleted
  without looking at any budget;
- otherwise the budgets of the pod's namespace whose selector matches the pod's labels are found
  (policy/v1: an empty selector ``{}`` matches every pod, a missing one none): more than one is a
  500; none, and the pod is deleted;
- a pod that is not Ready is deleted without touching the budget when the budget's
  ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``, or when the application is not disrupted
  (``currentHealthy >= desiredHealthy > 0``, the default ``IfHealthyBudget``);
- else the budget is checked and decremented: a status older than the spec
  (``observedGeneration < generation``) is a 429 ("still being processed", Retry-After 10), no
  disruption allowed is the recorded 429, a negative count or more than 2000 unconfirmed
  ``disruptedPods`` a 403; on success ``disruptionsAllowed`` goes down by one, the pod is listed in
  ``disruptedPods`` with the time, and the status is committed (new resourceVersion, a watch
  event) before the pod is deleted;
- deleting adds the pod condition ``DisruptionTarget`` (reason ``EvictionByEvictionAPI``) first, as
  the PodDisruptionConditions feature does, replacing a ``DisruptionTarget`` condition that was
  there (a scheduler's ``PreemptionByScheduler`` one included), then deletes the pod with the
  eviction's ``deleteOptions`` (grace period, uid and resourceVersion preconditions): a bound pod
  gets a deletionTimestamp and goes when its kubelet confirms, an unbound one goes at once.

``dryRun`` (the query parameter or ``deleteOptions.dryRun``) makes every check and writes nothing;
its values are not validated. Not simulated: the retries on write conflicts (the simulator
applies a request in one step, so none can happen).

The controller recomputes, for each budget, what the real one does — with one simplification:
``expectedPods`` is the number of matching pods that are not terminal (Succeeded or Failed),
where the real controller asks the pods' controllers for their scale (for percentages and
``maxUnavailable``) or counts every matching pod (integer ``minAvailable``).
``currentHealthy`` counts matching pods that are Ready and not being deleted, except those
listed in ``disruptedPods`` (evicted but not yet seen going); ``desiredHealthy`` is
``minAvailable`` (an integer, or a percentage of ``expectedPods`` rounded up) or
``expectedPods - maxUnavailable`` (a percentage rounded up); ``disruptionsAllowed`` is
``currentHealthy - desiredHealthy``, at least 0, and 0 while no pod is expected. Entries of
``disruptedPods`` are dropped once their pod is gone or being deleted, or after two minutes
(``DELETION_TIMEOUT``). It writes only when a figure changed, with ``observedGeneration`` and the
``DisruptionAllowed`` condition (``SufficientPods``/``InsufficientPods``; ``SyncFailed`` for a
budget whose numbers cannot be read, which then never becomes current, as on a real cluster).

Cost: 20,000 pods is a benchmark's normal load, so a pod event costs one dictionary lookup unless
its namespace has budgets; then one selector match per budget there. Each budget keeps its member
pods and running counts, so recomputing it costs O(its ``disruptedPods``), not O(pods).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gang.sim import errors
from gang.sim.api import DeleteOptions, SimApi, rfc3339
from gang.sim.errors import ApiError
from gang.sim.pods import is_terminal
from gang.sim.reconciler import Reconciler
from gang.sim.store import DELETED, Obj, ObjKey, StoredEvent
from gang.sim.workloads import selector_matches

PDB_KEY = "policy/v1/poddisruptionbudgets"
EVICTION_API_VERSIONS = ("policy/v1", "policy/v1beta1")
#: how long an eviction's entry in ``disruptedPods`` waits for its pod to go (the controller's)
DELETION_TIMEOUT = 120.0
#: more unconfirmed evictions than this and the eviction handler refuses (eviction.go)
MAX_DISRUPTED_POD_SIZE = 2000
DISRUPTION_ALLOWED = "DisruptionAllowed"
DISRUPTION_TARGET = "DisruptionTarget"
VIOLATION_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_BUDGETS_MESSAGE = (
    "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
    "support."
)
_OPERATORS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})


# --- shared helpers ---------------------------------------------------------------------------


def selects(selector: Any, labels: Any) -> bool:
    """Whether a policy/v1 budget's selector matches a pod's labels.

    A missing (null) selector matches nothing, an empty one everything; one that is not a valid
    label selector matches nothing (LabelSelectorAsSelector fails, the budget is skipped).
    """
    if not isinstance(selector, dict):
        return False
    for expr in selector.get("matchExpressions") or []:
        if not isinstance(expr, dict) or expr.get("operator") not in _OPERATORS:
            return False
    return selector_matches(selector, labels if isinstance(labels, dict) else {})


def pod_ready(pod: Obj) -> bool:
    """podutil.IsPodReady: the Ready condition is True."""
    status = pod.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    return isinstance(conditions, list) and any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in conditions
    )


def _parse_time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _scaled(value: Any, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent with rounding up; ValueError when unreadable."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        if not value.endswith("%"):
            raise ValueError("invalid type: string is not a percentage")
        try:
            percent = int(value[:-1])
        except ValueError:
            raise ValueError(
                f'invalid value "{value}": strconv.Atoi: parsing "{value[:-1]}": invalid syntax'
            ) from None
        return -(-percent * total // 100)
    raise ValueError(f"invalid value for IntOrString: invalid type: {type(value).__name__}")


def expected_and_desired(spec: Any, expected: int) -> tuple[int, int]:
    """(expectedPods, desiredHealthy) for a budget's spec; ValueError when it cannot be read."""
    spec = spec if isinstance(spec, dict) else {}
    max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
    if max_unavailable is not None:
        return expected, max(0, expected - _scaled(max_unavailable, expected))
    if min_available is not None:
        return expected, _scaled(min_available, expected)
    return 0, 0  # neither: the real controller leaves both at zero


def set_condition(conditions: list[Obj], new: Obj, now: str) -> list[Obj]:
    """apimeta.SetStatusCondition: replace by type, keeping lastTransitionTime if status holds."""
    out = []
    found = False
    for old in conditions:
        if isinstance(old, dict) and old.get("type") == new["type"]:
            found = True
            moved = old.get("status") != new["status"]
            out.append(
                {
                    "type": new["type"],
                    "status": new["status"],
                    "observedGeneration": new["observedGeneration"],
                    "lastTransitionTime": now if moved else old.get("lastTransitionTime", now),
                    "reason": new["reason"],
                    "message": new["message"],
                }
            )
        else:
            out.append(old)
    if not found:
        out.append(
            {
                "type": new["type"],
                "status": new["status"],
                "observedGeneration": new["observedGeneration"],
                "lastTransitionTime": now,
                "reason": new["reason"],
                "message": new["message"],
            }
        )
    return out


def _allowed_condition(status: Obj, now: str) -> list[Obj]:
    """pdbhelper.UpdateDisruptionAllowedCondition."""
    sufficient = _int(status.get("disruptionsAllowed")) > 0
    return set_condition(
        list(status.get("conditions") or []),
        {
            "type": DISRUPTION_ALLOWED,
            "status": "True" if sufficient else "False",
            "observedGeneration": _int(status.get("observedGeneration")),
            "reason": "SufficientPods" if sufficient else "InsufficientPods",
            "message": "",
        },
        now,
    )


def _conditions_up_to_date(pdb: Obj) -> bool:
    """pdbhelper.ConditionsAreUpToDate."""
    status = pdb.get("status") or {}
    cond = next(
        (
            c
            for c in status.get("conditions") or []
            if isinstance(c, dict) and c.get("type") == DISRUPTION_ALLOWED
        ),
        None,
    )
    if cond is None or _int(status.get("observedGeneration")) != _int(
        pdb["metadata"].get("generation")
    ):
        return False
    if _int(status.get("disruptionsAllowed")) > 0:
        return cond.get("status") == "True" and cond.get("reason") == "SufficientPods"
    return cond.get("status") == "False" and cond.get("reason") == "InsufficientPods"


def ordered_status(status: Obj) -> Obj:
    """A PodDisruptionBudgetStatus with the Go struct's field order and omitempty rules."""
    out: Obj = {}
    if _int(status.get("observedGeneration")):
        out["observedGeneration"] = status["observedGeneration"]
    if status.get("disruptedPods"):
        out["disruptedPods"] = status["disruptedPods"]
    for key in ("disruptionsAllowed", "currentHealthy", "desiredHealthy", "expectedPods"):
        out[key] = _int(status.get(key))
    if status.get("conditions"):
        out["conditions"] = status["conditions"]
    return out


# --- the eviction subresource ------------------------------------------------------------------


def _delete_options(raw: Any) -> tuple[DeleteOptions, bool]:
    """The Eviction's deleteOptions as the pod delete takes them, and whether it is a dry run."""
    options = DeleteOptions()
    if raw is None:
        return options, False
    if not isinstance(raw, dict):
        raise errors.bad_request(
            'Eviction in version "v1" cannot be handled as a Eviction: deleteOptions: '
            "expected an object"
        )
    grace = raw.get("gracePeriodSeconds")
    if grace is not None:
        if not isinstance(grace, int) or isinstance(grace, bool):
            raise errors.bad_request(
                'Eviction in version "v1" cannot be handled as a Eviction: '
                "deleteOptions.gracePeriodSeconds: expected an integer"
            )
        options.grace_period_seconds = grace
    pre = raw.get("preconditions")
    if isinstance(pre, dict):
        uid, rv = pre.get("uid"), pre.get("resourceVersion")
        options.precondition_uid = uid if isinstance(uid, str) and uid else None
        options.precondition_resource_version = rv if isinstance(rv, str) and rv else None
    return options, bool(raw.get("dryRun"))


def _check_eviction(namespace: str, name: str, body: Any) -> Any:
    """Decode the Eviction body as the apiserver would; answer its deleteOptions."""
    if not isinstance(body, dict) or not isinstance(body.get("metadata", {}), dict):
        raise errors.bad_request(
            "the body of the request was in an unknown format: expected an Eviction object"
        )
    kind, api_version = body.get("kind"), body.get("apiVersion")
    if kind not in (None, "", "Eviction"):
        raise errors.bad_request(
            f"the kind in the data ({kind}) does not match the expected kind (Eviction)"
        )
    if api_version not in (None, "", *EVICTION_API_VERSIONS):
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API "
            "version (policy/v1)"
        )
    meta = body.get("metadata") or {}
    if meta.get("namespace") not in (None, "", namespace):
        raise errors.bad_request(
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    if meta.get("name") != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    return body.get("deleteOptions")


def _too_many_requests(cause: str, retry_after: int) -> ApiError:
    """errors.NewTooManyRequests with a DisruptionBudget cause, as eviction.go builds it."""
    details: Obj = {"causes": [{"reason": "DisruptionBudget", "message": cause}]}
    headers: dict[str, str] = {}
    if retry_after > 0:
        details["retryAfterSeconds"] = retry_after
        headers["Retry-After"] = str(retry_after)
    return ApiError(429, "TooManyRequests", VIOLATION_MESSAGE, details, headers)


def _budget_forbidden(name: str, why: str) -> ApiError:
    return ApiError(
        403,
        "Forbidden",
        f'poddisruptionbudget.policy "{name}" is forbidden: {why}',
        {"name": name, "group": "policy", "kind": "poddisruptionbudget"},
    )


def budgets_for(api: SimApi, pod: Obj) -> list[Obj]:
    """The budgets of the pod's namespace whose selector matches it (getPodDisruptionBudgets)."""
    meta = pod["metadata"]
    labels = meta.get("labels") or {}
    rt = api.registry.by_key(PDB_KEY)
    return [
        pdb
        for pdb in api.store.items(rt.storage_key, meta.get("namespace", ""))
        if selects((pdb.get("spec") or {}).get("selector"), labels)
    ]


def evict(api: SimApi, namespace: str, name: str, body: Any, *, dry_run: bool = False) -> Obj:
    """POST pods/{name}/eviction: the Success Status (HTTP 201), or an ApiError.

    ``dry_run`` is the request's ``dryRun=All``; with it (or the body's
    ``deleteOptions.dryRun``) every check is made and nothing is written.
    """
    options, body_dry_run = _delete_options(_check_eviction(namespace, name, body))
    dry_run = dry_run or body_dry_run
    pods_rt = api.rt_pods
    pod = api.store.get(pods_rt.storage_key, namespace, name)
    if pod is None:
        raise errors.not_found(pods_rt, name)
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Pending", "Succeeded", "Failed") or pod["metadata"].get("deletionTimestamp"):
        _condition_and_delete(api, pod, options, dry_run)
        return errors.status_body(201, status="Success")
    budgets = budgets_for(api, pod)
    if len(budgets) > 1:
        raise ApiError(500, None, MULTIPLE_BUDGETS_MESSAGE)
    if budgets:
        pdb = budgets[0]
        spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
        unhealthy_ok = not pod_ready(pod) and (
            spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow"
            or _int(status.get("currentHealthy")) >= _int(status.get("desiredHealthy")) > 0
        )
        if not unhealthy_ok:
            _check_and_decrement(api, pdb, name, dry_run)
    _condition_and_delete(api, pod, options, dry_run)
    return errors.status_body(201, status="Success")


def _check_and_decrement(api: SimApi, pdb: Obj, pod_name: str, dry_run: bool) -> None:
    meta = pdb["metadata"]
    status = pdb.get("status") or {}
    allowed = _int(status.get("disruptionsAllowed"))
    if _int(status.get("observedGeneration")) < _int(meta.get("generation")):
        raise _too_many_requests(
            f"The disruption budget {meta['name']} is still being processed by the server.", 10
        )
    if allowed < 0:
        raise _budget_forbidden(meta["name"], "pdb disruptions allowed is negative")
    disrupted = status.get("disruptedPods") or {}
    if len(disrupted) > MAX_DISRUPTED_POD_SIZE:
        raise _budget_forbidden(
            meta["name"],
            "DisruptedPods map too big - too many evictions not confirmed by PDB controller",
        )
    if allowed == 0:
        raise _too_many_requests(
            f"The disruption budget {meta['name']} needs {_int(status.get('desiredHealthy'))} "
            f"healthy pods and has {_int(status.get('currentHealthy'))} currently",
            0,
        )
    if dry_run:
        return
    now = rfc3339(api.clock())
    new_status = {**status, "disruptionsAllowed": allowed - 1}
    if allowed - 1 == 0:
        new_status["conditions"] = _allowed_condition(new_status, now)
    new_status["disruptedPods"] = {**disrupted, pod_name: now}
    rt = api.registry.by_key(PDB_KEY)
    api.update(
        rt,
        meta.get("namespace"),
        meta["name"],
        {**pdb, "status": ordered_status(new_status)},
        subresource="status",
    )


def _condition_and_delete(api: SimApi, pod: Obj, options: DeleteOptions, dry_run: bool) -> None:
    """addConditionAndDeletePod: preconditions, the DisruptionTarget condition, the delete."""
    rt = api.rt_pods
    meta = pod["metadata"]
    name, namespace = meta["name"], meta.get("namespace", "")
    if options.precondition_uid and options.precondition_uid != meta.get("uid"):
        raise errors.conflict(
            rt,
            name,
            f"the UID in the precondition ({options.precondition_uid}) does not match the UID "
            f"in record ({meta.get('uid')}). The object might have been deleted and then "
            "recreated",
            kind="Pod",
        )
    if options.precondition_resource_version and options.precondition_resource_version != meta.get(
        "resourceVersion"
    ):
        raise errors.conflict(
            rt,
            name,
            f"the ResourceVersion in the precondition ({options.precondition_resource_version}) "
            f"does not match the ResourceVersion in record ({meta.get('resourceVersion')}). The "
            "object might have been modified",
            kind="Pod",
        )
    if dry_run:
        return
    status = dict(pod.get("status") or {})
    status["conditions"] = _disruption_target(
        list(status.get("conditions") or []), rfc3339(api.clock())
    )
    api.update(
        rt,
        namespace,
        name,
        {
            **pod,
            "metadata": {k: v for k, v in meta.items() if k != "resourceVersion"},
            "status": status,
        },
        subresource="status",
    )
    # the preconditions held against the pod just read, and nothing ran in between
    api.delete(rt, namespace, name, DeleteOptions(options.grace_period_seconds))


def _disruption_target(conditions: list[Obj], now: str) -> list[Obj]:
    """podutil.UpdatePodCondition with the Eviction API's DisruptionTarget condition."""
    new = {
        "type": DISRUPTION_TARGET,
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": now,
        "reason": "EvictionByEvictionAPI",
        "message": "Eviction API: evicting",
    }
    for i, old in enumerate(conditions):
        if isinstance(old, dict) and old.get("type") == DISRUPTION_TARGET:
            if old.get("status") == new["status"]:
                new["lastTransitionTime"] = old.get("lastTransitionTime")
            conditions[i] = new  # reason and message replaced; lastProbeTime zero (null)
            return conditions
    conditions.append(new)
    return conditions


# --- the disruption controller -----------------------------------------------------------------


@dataclass(slots=True)
class _Budget:
    """What the controller keeps per budget: its selector, members, and running counts."""

    selector: Any
    #: member pod name → (expected: not terminal, healthy: Ready and not being deleted)
    members: dict[str, tuple[bool, bool]] = field(default_factory=dict)
    expected: int = 0
    healthy: int = 0

    def put(self, name: str, sig: tuple[bool, bool] | None) -> bool:
        """Set (or, with None, remove) a member's figures; whether anything changed."""
        old = self.members.get(name)
        if old == sig:
            return False
        if old is not None:
            self.expected -= old[0]
            self.healthy -= old[1]
        if sig is None:
            del self.members[name]
        else:
            self.members[name] = sig
            self.expected += sig[0]
            self.healthy += sig[1]
        return True


def _signature(pod: Obj) -> tuple[bool, bool]:
    return (
        not is_terminal(pod),
        not pod["metadata"].get("deletionTimestamp") and pod_ready(pod),
    )


class DisruptionController(Reconciler):
    """Keeps every PodDisruptionBudget's status current; see the module docstring."""

    def __init__(self, api: SimApi) -> None:
        super().__init__(api)
        self.rt = api.registry.by_key(PDB_KEY)
        self._pods = api.rt_pods.storage_key
        self._pdbs = self.rt.storage_key
        #: namespace → budget name → its bookkeeping; namespaces without budgets are absent
        self._by_ns: dict[str, dict[str, _Budget]] = {}
        self._budgets = self.queue(self.sync)

    def _seed(self) -> None:
        for pdb in self.api.store.items(self._pdbs):
            self._track(pdb)

    def stop(self) -> None:
        super().stop()
        self._by_ns.clear()

    # --- events --------------------------------------------------------------------------

    def _on_event(self, storage_key: str, event: StoredEvent) -> None:
        if storage_key == self._pods:
            meta = event.obj["metadata"]
            namespace = meta.get("namespace", "")
            budgets = self._by_ns.get(namespace)
            if not budgets:
                return  # the common case: one lookup per pod event
            name = meta["name"]
            labels = meta.get("labels") or {}
            sig = None if event.type == DELETED else _signature(event.obj)
            for pdb_name, budget in budgets.items():
                member = sig if sig is not None and selects(budget.selector, labels) else None
                if budget.put(name, member):
                    self._budgets.add((namespace, pdb_name))
        elif storage_key == self._pdbs:
            if event.type == DELETED:
                self._forget(event.obj)
            else:
                self._track(event.obj)

    def _track(self, pdb: Obj) -> None:
        meta = pdb["metadata"]
        namespace, name = meta.get("namespace", ""), meta["name"]
        selector = (pdb.get("spec") or {}).get("selector")
        budgets = self._by_ns.setdefault(namespace, {})
        budget = budgets.get(name)
        if budget is None or budget.selector != selector:
            budget = budgets[name] = _Budget(selector)
            for pod in self.api.store.items(self._pods, namespace):
                if selects(selector, pod["metadata"].get("labels") or {}):
                    budget.put(pod["metadata"]["name"], _signature(pod))
        self._budgets.add((namespace, name))

    def _forget(self, pdb: Obj) -> None:
        meta = pdb["metadata"]
        key = (meta.get("namespace", ""), meta["name"])
        budgets = self._by_ns.get(key[0])
        if budgets is not None:
            budgets.pop(key[1], None)
            if not budgets:
                del self._by_ns[key[0]]
        self._budgets.discard(key)
        self.cancel_timer(key)

    def _recheck_at(self, key: ObjKey, when: float) -> None:
        """Look at the budget again when its oldest ``disruptedPods`` entry expires."""
        delay = max(0.0, when - self.api.clock()) + 0.01
        self.call_later(key, delay, functools.partial(self._budgets.add, key), replace=True)

    # --- one budget ----------------------------------------------------------------------

    def sync(self, key: ObjKey) -> None:
        """Recompute one budget's status and write it if a figure changed."""
        pdb = self.api.store.get(self._pdbs, *key)
        budget = self._by_ns.get(key[0], {}).get(key[1])
        if pdb is None or budget is None:
            return
        meta = pdb["metadata"]
        status = pdb.get("status") or {}
        clock = self.api.clock()
        now = rfc3339(clock)
        generation = _int(meta.get("generation"))
        try:
            expected, desired = expected_and_desired(pdb.get("spec"), budget.expected)
        except ValueError as err:
            self._fail_safe(pdb, str(err), now)
            return
        disrupted, recheck = self._disrupted_pods(key[0], budget, status, clock)
        healthy = budget.healthy - sum(1 for n in disrupted if budget.members.get(n, (0, 0))[1])
        allowed = healthy - desired
        if expected <= 0 or allowed <= 0:
            allowed = 0
        if recheck is not None:
            self._recheck_at(key, recheck)
        if (
            _int(status.get("currentHealthy")) == healthy
            and _int(status.get("desiredHealthy")) == desired
            and _int(status.get("expectedPods")) == expected
            and _int(status.get("disruptionsAllowed")) == allowed
            and (status.get("disruptedPods") or {}) == disrupted
            and _int(status.get("observedGeneration")) == generation
            and _conditions_up_to_date(pdb)
        ):
            return
        new_status: Obj = {
            "observedGeneration": generation,
            "disruptedPods": disrupted,
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "expectedPods": expected,
            "conditions": list(status.get("conditions") or []),
        }
        new_status["conditions"] = _allowed_condition(new_status, now)
        self._write(pdb, ordered_status(new_status))

    def _disrupted_pods(
        self, namespace: str, budget: _Budget, status: Obj, clock: float
    ) -> tuple[dict[str, str], float | None]:
        """buildDisruptedPodMap: entries whose pod still runs and whose time has not run out."""
        kept: dict[str, str] = {}
        recheck: float | None = None
        raw = status.get("disruptedPods")
        if not isinstance(raw, dict):
            return kept, recheck
        for pod_name, when in raw.items():
            if pod_name not in budget.members:
                continue
            pod = self.api.store.get(self._pods, namespace, pod_name)
            if pod is None or pod["metadata"].get("deletionTimestamp"):
                continue
            at = _parse_time(when)
            expires = (at if at is not None else 0.0) + DELETION_TIMEOUT
            if expires < clock:
                continue  # expected to go but did not: no longer counted as disrupted
            kept[pod_name] = when
            if recheck is None or expires < recheck:
                recheck = expires
        return kept, recheck

    def _fail_safe(self, pdb: Obj, why: str, now: str) -> None:
        """failSafe: no disruption allowed, SyncFailed, observedGeneration left as it was."""
        status = dict(pdb.get("status") or {})
        status["disruptionsAllowed"] = 0
        status["conditions"] = set_condition(
            list(status.get("conditions") or []),
            {
                "type": DISRUPTION_ALLOWED,
                "status": "False",
                "observedGeneration": _int(status.get("observedGeneration")),
                "reason": "SyncFailed",
                "message": why,
            },
            now,
        )
        self._write(pdb, ordered_status(status))

    def _write(self, pdb: Obj, status: Obj) -> None:
        """A status-subresource write; an unchanged status is a no-op (no new version)."""
        self.write(self.rt, {**pdb, "status": status}, "status")  # None: deleted meanwhile
