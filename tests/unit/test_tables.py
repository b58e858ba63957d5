"""Server-side tables: negotiation, kube-apiserver's printer columns, and HumanDuration ages."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from gang.sim.tables import (
    TABLE_V1,
    TABLE_V1BETA1,
    build_table,
    human_duration,
    table_api_version,
    translate_timestamp_since,
    wants_table,
)

KUBECTL_ACCEPT = (
    "application/json;as=Table;v=v1;g=meta.k8s.io,"
    "application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
    "application/json"
)
NOW = datetime(2026, 11, 21, 15, 0, 0, tzinfo=UTC)


def ts(ago: timedelta) -> str:
    return (NOW - ago).strftime("%Y-%m-%dT%H:%M:%SZ")


def table(plural: str, *objects: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("api_version", TABLE_V1)
    kwargs.setdefault("resource_version", "42")
    kwargs.setdefault("now", NOW)
    return build_table(plural, list(objects), **kwargs)


def cells(plural: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The single row of a one-object table, keyed by column name."""
    t = table(plural, obj)
    names = [c["name"] for c in t["columnDefinitions"]]
    (row,) = t["rows"]
    assert len(row["cells"]) == len(names)
    return dict(zip(names, row["cells"], strict=True))


def columns(plural: str) -> list[tuple[str, str, str, int]]:
    return [
        (c["name"], c["type"], c["format"], c["priority"])
        for c in table(plural)["columnDefinitions"]
    ]


def pod(
    name: str = "g0000-000",
    *,
    containers: int = 1,
    statuses: list[dict[str, Any]] | None = None,
    phase: str = "Pending",
    node: str | None = None,
    age: timedelta = timedelta(minutes=5),
    **extra_status: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [{"name": f"c{i}", "image": "pause"} for i in range(containers)],
        "schedulerName": "cosched",
    }
    if node is not None:
        spec["nodeName"] = node
    status: dict[str, Any] = {"phase": phase, **extra_status}
    if statuses is not None:
        status["containerStatuses"] = statuses
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": "12e38434",
            "resourceVersion": "38876",
            "creationTimestamp": ts(age),
            "labels": {"pod-group.scheduling.sigs.k8s.io": "g0000"},
        },
        "spec": spec,
        "status": status,
    }


def running(name: str, *, ready: bool, restarts: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "ready": ready,
        "restartCount": restarts,
        "state": {"running": {"startedAt": ts(timedelta(minutes=4))}},
    }


def node(
    name: str = "bench-node-00029",
    *,
    ready: str | None = "True",
    unschedulable: bool = False,
    labels: dict[str, str] | None = None,
    **status: Any,
) -> dict[str, Any]:
    conditions = [{"type": "MemoryPressure", "status": "False"}]
    if ready is not None:
        conditions.append({"type": "Ready", "status": ready})
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "creationTimestamp": ts(timedelta(days=3, hours=5)),
            "labels": labels or {},
        },
        "spec": {},
        "status": {"conditions": conditions, **status},
    }
    if unschedulable:
        obj["spec"]["unschedulable"] = True
    return obj


# --- negotiation ------------------------------------------------------------------------------


def test_kubectl_accept_header_asks_for_a_v1_table() -> None:
    assert wants_table(KUBECTL_ACCEPT)
    assert table_api_version(KUBECTL_ACCEPT) == TABLE_V1


@pytest.mark.parametrize(
    "accept",
    [
        None,
        "",
        "application/json",
        "*/*",
        "application/json, */*",
        "application/vnd.kubernetes.protobuf",
        # plain JSON listed first wins over a later table clause
        "application/json,application/json;as=Table;v=v1;g=meta.k8s.io",
        # not a Table, or not one the server knows how to produce
        "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
        "application/json;as=Table;v=v2;g=meta.k8s.io",
        "application/json;as=Table;v=v1;g=example.com",
        "application/json;as=Table",
        # q=0 means "not acceptable"
        "application/json;as=Table;v=v1;g=meta.k8s.io;q=0",
        # YAML tables exist on a real server, but the simulator only speaks JSON
        "application/yaml;as=Table;v=v1;g=meta.k8s.io",
    ],
)
def test_headers_that_do_not_get_a_table(accept: str | None) -> None:
    assert not wants_table(accept)


@pytest.mark.parametrize(
    ("accept", "version"),
    [
        (KUBECTL_ACCEPT, TABLE_V1),
        ("application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", TABLE_V1BETA1),
        (
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            TABLE_V1BETA1,
        ),
        # an unsupported clause is skipped, the next one is served
        (
            "application/json;as=Table;v=v2;g=meta.k8s.io,"
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io",
            TABLE_V1BETA1,
        ),
        # q-values outrank the order of listing
        (
            "application/json;as=Table;v=v1beta1;g=meta.k8s.io;q=0.5,"
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            TABLE_V1,
        ),
        (" application/json ; as=Table ; g=meta.k8s.io ; v=v1 ", TABLE_V1),
        ("*/*;as=Table;v=v1;g=meta.k8s.io", TABLE_V1),
        # no table clause at all: the current version is the fallback
        ("application/json", TABLE_V1),
    ],
)
def test_table_api_version_follows_the_clients_preference(accept: str, version: str) -> None:
    assert table_api_version(accept) == version


# --- HumanDuration ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta", "text"),
    [
        (timedelta(seconds=-5), "<invalid>"),
        (timedelta(seconds=-2), "<invalid>"),
        (timedelta(seconds=-1.5), "0s"),  # clock skew under 2 s reads as "now"
        (timedelta(seconds=-1), "0s"),
        (timedelta(0), "0s"),
        (timedelta(milliseconds=999), "0s"),
        (timedelta(seconds=1), "1s"),
        (timedelta(seconds=45), "45s"),
        (timedelta(seconds=70), "70s"),
        (timedelta(seconds=90), "90s"),
        (timedelta(seconds=119, milliseconds=999), "119s"),
        (timedelta(seconds=120), "2m"),
        (timedelta(seconds=190), "3m10s"),
        (timedelta(minutes=5, seconds=3), "5m3s"),
        (timedelta(minutes=9, seconds=59), "9m59s"),
        (timedelta(minutes=10), "10m"),
        (timedelta(minutes=10, seconds=59), "10m"),
        (timedelta(minutes=45), "45m"),
        (timedelta(minutes=70), "70m"),
        (timedelta(minutes=179, seconds=59), "179m"),
        (timedelta(hours=3), "3h"),
        (timedelta(hours=3, minutes=5), "3h5m"),
        (timedelta(hours=7, minutes=59, seconds=59), "7h59m"),
        (timedelta(hours=8), "8h"),
        (timedelta(hours=20, minutes=30), "20h"),
        (timedelta(hours=47), "47h"),
        (timedelta(hours=48), "2d"),
        (timedelta(hours=49), "2d1h"),
        (timedelta(days=3, hours=5), "3d5h"),
        (timedelta(days=7, hours=23), "7d23h"),
        (timedelta(days=8, hours=2), "8d"),
        (timedelta(days=40), "40d"),
        (timedelta(days=367), "367d"),
        (timedelta(days=729), "729d"),
        (timedelta(days=730), "2y"),
        (timedelta(days=365 * 2, hours=25), "2y1d"),
        (timedelta(days=365 * 2 + 30), "2y30d"),
        (timedelta(days=365 * 8 - 1), "7y364d"),
        (timedelta(days=365 * 8, hours=2), "8y"),
        (timedelta(days=365 * 9 + 100), "9y"),
    ],
)
def test_human_duration_matches_apimachinery(delta: timedelta, text: str) -> None:
    assert human_duration(delta) == text


@pytest.mark.parametrize(
    ("timestamp", "text"),
    [
        ("2026-11-21T14:39:41Z", "20m"),
        ("2026-11-21T14:59:30.123456Z", "29s"),  # MicroTime, as eventTime is written
        ("2026-11-21T16:59:30+02:00", "30s"),
        ("2026-11-21T14:59:00", "60s"),  # no zone: read as UTC
        (None, "<unknown>"),
        ("", "<unknown>"),
        ("yesterday", "<unknown>"),
    ],
)
def test_translate_timestamp_since(timestamp: str | None, text: str) -> None:
    assert translate_timestamp_since(timestamp, NOW) == text


def test_age_defaults_to_the_current_time() -> None:
    just_now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    obj = {"metadata": {"name": "x", "creationTimestamp": just_now}}
    t = build_table("configmaps", [obj], api_version=TABLE_V1, resource_version="1")
    assert t["rows"][0]["cells"][1] in ("0s", "1s", "2s")


# --- table shape ------------------------------------------------------------------------------


def test_table_envelope_is_shaped_like_kube_apiserver() -> None:
    t = table("pods", pod(), resource_version="38876", continue_token="eyJ2IjoxfQ")
    assert list(t) == ["kind", "apiVersion", "metadata", "columnDefinitions", "rows"]
    assert t["kind"] == "Table"
    assert t["apiVersion"] == TABLE_V1
    assert t["metadata"] == {"resourceVersion": "38876", "continue": "eyJ2IjoxfQ"}
    for column in t["columnDefinitions"]:
        assert list(column) == ["name", "type", "format", "description", "priority"]
        assert column["description"]
    assert list(t["rows"][0]) == ["cells", "object"]
    json.dumps(t)  # plain JSON all the way down


def test_no_continue_key_without_a_token() -> None:
    assert table("pods", pod())["metadata"] == {"resourceVersion": "42"}
    assert table("pods", continue_token="")["metadata"] == {"resourceVersion": "42"}


def test_empty_list_still_has_columns() -> None:
    t = table("nodes")
    assert t["rows"] == []
    assert t["columnDefinitions"][0]["name"] == "Name"


def test_column_definitions_are_fresh_copies() -> None:
    first = table("pods")
    first["columnDefinitions"][0]["name"] = "mangled"
    assert table("pods")["columnDefinitions"][0]["name"] == "Name"


@pytest.mark.parametrize(
    "plural", ["pods", "nodes", "podgroups", "events", "leases", "namespaces", "configmaps"]
)
def test_every_row_has_one_cell_per_column_even_for_empty_objects(plural: str) -> None:
    t = table(plural, {}, {"metadata": None, "spec": [], "status": "junk"})
    width = len(t["columnDefinitions"])
    assert [len(r["cells"]) for r in t["rows"]] == [width, width]


# --- includeObject ----------------------------------------------------------------------------


def test_include_object_metadata_is_the_default() -> None:
    p = pod()
    (row,) = table("pods", p)["rows"]
    assert row["object"] == {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": p["metadata"],
    }
    (row,) = table("pods", p, include_object="")["rows"]
    assert row["object"]["kind"] == "PartialObjectMetadata"


def test_partial_metadata_takes_the_tables_group_version() -> None:
    (row,) = table("pods", pod(), api_version=TABLE_V1BETA1)["rows"]
    assert row["object"]["apiVersion"] == "meta.k8s.io/v1beta1"


def test_include_object_object_embeds_the_whole_object() -> None:
    p = pod()
    (row,) = table("pods", p, include_object="Object")["rows"]
    assert row["object"] == p


def test_include_object_none_leaves_the_object_out() -> None:
    (row,) = table("pods", pod(), include_object="None")["rows"]
    assert "object" not in row
    assert row["cells"][0] == "g0000-000"


def test_unknown_include_object_is_rejected_like_kube_apiserver() -> None:
    with pytest.raises(ValueError, match=r'unrecognized includeObject value: "Everything"'):
        table("pods", pod(), include_object="Everything")


# --- pods -------------------------------------------------------------------------------------


def test_pod_columns() -> None:
    assert columns("pods") == [
        ("Name", "string", "name", 0),
        ("Ready", "string", "", 0),
        ("Status", "string", "", 0),
        ("Restarts", "string", "", 0),
        ("Age", "string", "", 0),
        ("IP", "string", "", 1),
        ("Node", "string", "", 1),
        ("Nominated Node", "string", "", 1),
        ("Readiness Gates", "string", "", 1),
    ]


def test_bound_running_pod_with_one_of_two_containers_ready() -> None:
    p = pod(
        containers=2,
        phase="Running",
        node="bench-node-00029",
        podIP="10.244.1.7",
        statuses=[running("c0", ready=True), running("c1", ready=False)],
    )
    assert cells("pods", p) == {
        "Name": "g0000-000",
        "Ready": "1/2",
        "Status": "Running",
        "Restarts": "0",
        "Age": "5m",
        "IP": "10.244.1.7",
        "Node": "bench-node-00029",
        "Nominated Node": "<none>",
        "Readiness Gates": "<none>",
    }


def test_pending_unbound_pod_like_the_recorded_one() -> None:
    p = pod(
        age=timedelta(seconds=42),
        conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        qosClass="Guaranteed",
    )
    row = cells("pods", p)
    assert (row["Ready"], row["Status"], row["Restarts"]) == ("0/1", "Pending", "0")
    assert row["Age"] == "42s"
    assert (row["IP"], row["Node"], row["Nominated Node"]) == ("<none>", "<none>", "<none>")


def test_nominated_node_and_pod_ips() -> None:
    p = pod(
        nominatedNodeName="bench-node-00003",
        podIP="10.0.0.1",
        podIPs=[{"ip": "10.0.0.9"}, {"ip": "fd00::9"}],
    )
    row = cells("pods", p)
    assert row["Nominated Node"] == "bench-node-00003"
    assert row["IP"] == "10.0.0.9"  # podIPs[0] is what the printer reads


def test_pod_being_deleted_is_terminating() -> None:
    p = pod(phase="Running", node="n1", statuses=[running("c0", ready=True)])
    p["metadata"]["deletionTimestamp"] = ts(timedelta(seconds=3))
    assert cells("pods", p)["Status"] == "Terminating"


def test_finished_pod_being_deleted_keeps_its_phase() -> None:
    p = pod(phase="Succeeded")
    p["metadata"]["deletionTimestamp"] = ts(timedelta(seconds=3))
    assert cells("pods", p)["Status"] == "Succeeded"


def test_pod_on_a_lost_node_being_deleted_is_unknown() -> None:
    p = pod(phase="Running", reason="NodeLost")
    p["metadata"]["deletionTimestamp"] = ts(timedelta(seconds=3))
    assert cells("pods", p)["Status"] == "Unknown"


def test_status_reason_overrides_phase() -> None:
    assert cells("pods", pod(phase="Failed", reason="Evicted"))["Status"] == "Evicted"


def test_waiting_container_reason_is_the_status() -> None:
    p = pod(
        node="n1",
        statuses=[
            {
                "name": "c0",
                "ready": False,
                "restartCount": 0,
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }
        ],
    )
    row = cells("pods", p)
    assert (row["Ready"], row["Status"]) == ("0/1", "ContainerCreating")


def test_crash_looping_container_shows_restarts_and_when() -> None:
    p = pod(
        phase="Running",
        statuses=[
            {
                "name": "c0",
                "ready": False,
                "restartCount": 3,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                "lastState": {
                    "terminated": {
                        "exitCode": 1,
                        "reason": "Error",
                        "finishedAt": ts(timedelta(seconds=75)),
                    }
                },
            }
        ],
    )
    row = cells("pods", p)
    assert (row["Status"], row["Restarts"]) == ("CrashLoopBackOff", "3 (75s ago)")


def test_restarts_sum_over_containers() -> None:
    p = pod(
        containers=2,
        phase="Running",
        statuses=[running("c0", ready=True, restarts=2), running("c1", ready=True, restarts=5)],
    )
    row = cells("pods", p)
    assert (row["Ready"], row["Restarts"]) == ("2/2", "7")


@pytest.mark.parametrize(
    ("terminated", "status"),
    [
        ({"exitCode": 0, "reason": "Completed"}, "Completed"),
        ({"exitCode": 137, "reason": "OOMKilled"}, "OOMKilled"),
        ({"exitCode": 2}, "ExitCode:2"),
        ({"exitCode": 0, "signal": 9}, "Signal:9"),
    ],
)
def test_terminated_container_reason(terminated: dict[str, Any], status: str) -> None:
    p = pod(
        phase="Running",
        statuses=[{"name": "c0", "ready": False, "state": {"terminated": terminated}}],
    )
    assert cells("pods", p)["Status"] == status


def test_completed_container_beside_a_running_one_reads_running_or_notready() -> None:
    statuses = [
        {
            "name": "c0",
            "ready": False,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
        },
        running("c1", ready=True),
    ]
    ready = pod(
        containers=2,
        phase="Running",
        statuses=statuses,
        conditions=[{"type": "Ready", "status": "True"}],
    )
    assert cells("pods", ready)["Status"] == "Running"
    not_ready = pod(containers=2, phase="Running", statuses=statuses)
    assert cells("pods", not_ready)["Status"] == "NotReady"


def test_ready_container_without_a_recorded_state_counts_as_running() -> None:
    p = pod(phase="Running", statuses=[{"name": "c0", "ready": True, "restartCount": 0}])
    assert cells("pods", p)["Ready"] == "1/1"


def test_init_containers_progress() -> None:
    p = pod(phase="Pending")
    p["spec"]["initContainers"] = [{"name": "i0"}, {"name": "i1"}]
    p["status"]["initContainerStatuses"] = [
        {"name": "i0", "ready": True, "state": {"terminated": {"exitCode": 0}}},
        {"name": "i1", "ready": False, "state": {"running": {}}},
    ]
    p["status"]["containerStatuses"] = [
        {"name": "c0", "ready": False, "state": {"waiting": {"reason": "PodInitializing"}}}
    ]
    assert cells("pods", p)["Status"] == "Init:1/2"


def test_failed_init_container() -> None:
    p = pod(phase="Pending")
    p["spec"]["initContainers"] = [{"name": "i0"}]
    p["status"]["initContainerStatuses"] = [
        {"name": "i0", "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}},
    ]
    row = cells("pods", p)
    assert (row["Status"], row["Restarts"]) == ("Init:CrashLoopBackOff", "2")


def test_sidecar_counts_towards_ready_and_total() -> None:
    p = pod(
        phase="Running",
        statuses=[running("c0", ready=True)],
        conditions=[{"type": "Initialized", "status": "True"}],
    )
    p["spec"]["initContainers"] = [{"name": "proxy", "restartPolicy": "Always"}]
    p["status"]["initContainerStatuses"] = [
        {
            "name": "proxy",
            "ready": True,
            "started": True,
            "restartCount": 1,
            "state": {"running": {}},
        },
    ]
    row = cells("pods", p)
    assert (row["Ready"], row["Status"], row["Restarts"]) == ("2/2", "Running", "1")


def test_scheduling_gated_pod() -> None:
    p = pod(conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}])
    assert cells("pods", p)["Status"] == "SchedulingGated"


def test_readiness_gates() -> None:
    p = pod(
        phase="Running",
        conditions=[
            {"type": "example.com/lb", "status": "True"},
            {"type": "example.com/dns", "status": "False"},
        ],
    )
    p["spec"]["readinessGates"] = [
        {"conditionType": "example.com/lb"},
        {"conditionType": "example.com/dns"},
        {"conditionType": "example.com/missing"},
    ]
    assert cells("pods", p)["Readiness Gates"] == "1/3"


def test_finished_pods_carry_a_completed_row_condition() -> None:
    (done,) = table("pods", pod(phase="Succeeded"))["rows"]
    assert done["conditions"] == [
        {
            "type": "Completed",
            "status": "True",
            "reason": "Succeeded",
            "message": "The pod has completed successfully.",
        }
    ]
    assert list(done) == ["cells", "conditions", "object"]
    (failed,) = table("pods", pod(phase="Failed"))["rows"]
    assert failed["conditions"][0]["reason"] == "Failed"
    (live,) = table("pods", pod(phase="Running"))["rows"]
    assert "conditions" not in live


def test_pod_without_creation_timestamp_has_unknown_age() -> None:
    p = pod()
    del p["metadata"]["creationTimestamp"]
    assert cells("pods", p)["Age"] == "<unknown>"


# --- nodes ------------------------------------------------------------------------------------


def test_node_columns() -> None:
    assert columns("nodes") == [
        ("Name", "string", "name", 0),
        ("Status", "string", "", 0),
        ("Roles", "string", "", 0),
        ("Age", "string", "", 0),
        ("Version", "string", "", 0),
        ("Internal-IP", "string", "", 1),
        ("External-IP", "string", "", 1),
        ("OS-Image", "string", "", 1),
        ("Kernel-Version", "string", "", 1),
        ("Container-Runtime", "string", "", 1),
    ]


def test_ready_worker_node_with_node_info() -> None:
    n = node(
        labels={"node-role.kubernetes.io/worker": "", "kubernetes.io/hostname": "n"},
        addresses=[
            {"type": "Hostname", "address": "n"},
            {"type": "InternalIP", "address": "10.0.0.29"},
        ],
        nodeInfo={
            "kubeletVersion": "v1.24.17",
            "osImage": "Ubuntu 22.04.3 LTS",
            "kernelVersion": "5.15.0-91-generic",
            "containerRuntimeVersion": "containerd://1.7.2",
        },
    )
    assert cells("nodes", n) == {
        "Name": "bench-node-00029",
        "Status": "Ready",
        "Roles": "worker",
        "Age": "3d5h",
        "Version": "v1.24.17",
        "Internal-IP": "10.0.0.29",
        "External-IP": "<none>",
        "OS-Image": "Ubuntu 22.04.3 LTS",
        "Kernel-Version": "5.15.0-91-generic",
        "Container-Runtime": "containerd://1.7.2",
    }


def test_cordoned_not_ready_node() -> None:
    row = cells("nodes", node(ready="False", unschedulable=True))
    assert row["Status"] == "NotReady,SchedulingDisabled"


def test_ready_condition_unknown_reads_not_ready() -> None:
    assert cells("nodes", node(ready="Unknown"))["Status"] == "NotReady"


def test_node_without_ready_condition_is_unknown() -> None:
    assert cells("nodes", node(ready=None))["Status"] == "Unknown"
    assert cells("nodes", node(ready=None, unschedulable=True))["Status"] == (
        "Unknown,SchedulingDisabled"
    )


def test_node_roles_are_sorted_and_deduplicated() -> None:
    n = node(
        labels={
            "node-role.kubernetes.io/worker": "",
            "node-role.kubernetes.io/control-plane": "",
            "kubernetes.io/role": "worker",
            "node-role.kubernetes.io/": "",  # empty role name is ignored
        }
    )
    assert cells("nodes", n)["Roles"] == "control-plane,worker"


def test_node_without_roles_or_info() -> None:
    row = cells("nodes", node())
    assert (row["Roles"], row["Version"]) == ("<none>", "")
    assert (row["Internal-IP"], row["External-IP"]) == ("<none>", "<none>")
    assert (row["OS-Image"], row["Kernel-Version"], row["Container-Runtime"]) == (
        "<unknown>",
        "<unknown>",
        "<unknown>",
    )


def test_node_external_ip_is_the_first_one() -> None:
    n = node(
        addresses=[
            {"type": "ExternalIP", "address": "203.0.113.5"},
            {"type": "ExternalIP", "address": "203.0.113.6"},
        ]
    )
    assert cells("nodes", n)["External-IP"] == "203.0.113.5"


# --- podgroups --------------------------------------------------------------------------------


def podgroup(**status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": "g0000",
            "namespace": "bench",
            "creationTimestamp": ts(timedelta(hours=3, minutes=5)),
        },
        "spec": {"minMember": 8},
        "status": status,
    }


def test_podgroup_columns() -> None:
    assert columns("podgroups") == [
        ("Name", "string", "name", 0),
        ("Phase", "string", "", 0),
        ("MinMember", "integer", "", 0),
        ("Scheduled", "integer", "", 0),
        ("Running", "integer", "", 0),
        ("Age", "string", "", 0),
    ]


def test_podgroup_row() -> None:
    assert cells("podgroups", podgroup(phase="Scheduled", scheduled=8, running=6)) == {
        "Name": "g0000",
        "Phase": "Scheduled",
        "MinMember": 8,
        "Scheduled": 8,
        "Running": 6,
        "Age": "3h5m",
    }


def test_new_podgroup_without_status() -> None:
    pg = podgroup()
    del pg["status"]
    row = cells("podgroups", pg)
    assert (row["Phase"], row["MinMember"], row["Scheduled"], row["Running"]) == ("", 8, 0, 0)


# --- events, leases, namespaces, anything else -------------------------------------------------


def test_event_columns() -> None:
    assert columns("events") == [
        ("Last Seen", "string", "", 0),
        ("Type", "string", "", 0),
        ("Reason", "string", "", 0),
        ("Object", "string", "", 0),
        ("Subobject", "string", "", 1),
        ("Source", "string", "", 1),
        ("Message", "string", "", 0),
        ("First Seen", "string", "", 1),
        ("Count", "string", "", 1),
        ("Name", "string", "name", 1),
    ]


def test_core_event_row() -> None:
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": "g0000-000.17a",
            "namespace": "bench",
            "creationTimestamp": ts(timedelta(minutes=30)),
        },
        "involvedObject": {"kind": "Pod", "name": "g0000-000", "namespace": "bench"},
        "reason": "Scheduled",
        "message": "Successfully assigned bench/g0000-000 to bench-node-00029\n",
        "type": "Normal",
        "source": {"component": "cosched"},
        "firstTimestamp": ts(timedelta(minutes=30)),
        "lastTimestamp": ts(timedelta(seconds=45)),
        "count": 4,
    }
    assert cells("events", event) == {
        "Last Seen": "45s",
        "Type": "Normal",
        "Reason": "Scheduled",
        "Object": "pod/g0000-000",
        "Subobject": "",
        "Source": "cosched",
        "Message": "Successfully assigned bench/g0000-000 to bench-node-00029",
        "First Seen": "30m",
        "Count": 4,
        "Name": "g0000-000.17a",
    }


def test_events_k8s_io_event_row() -> None:
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e1", "creationTimestamp": ts(timedelta(minutes=9))},
        "eventTime": "2026-11-21T14:51:00.000000Z",
        "regarding": {"kind": "PodGroup", "name": "g0000"},
        "reason": "GangBound",
        "note": "8/8 members bound",
        "type": "Normal",
        "reportingController": "cosched",
        "reportingInstance": "cosched-0",
    }
    row = cells("events", event)
    assert row["Last Seen"] == row["First Seen"] == "9m"
    assert (row["Object"], row["Message"], row["Source"], row["Count"]) == (
        "podgroup/g0000",
        "8/8 members bound",
        "cosched, cosched-0",
        1,
    )


def test_event_series_overrides_last_seen_and_count() -> None:
    event = {
        "metadata": {"name": "e2"},
        "eventTime": ts(timedelta(hours=1)),
        "series": {"count": 12, "lastObservedTime": ts(timedelta(seconds=10))},
        "regarding": {"kind": "Node"},
        "type": "Warning",
        "reason": "Pressure",
    }
    row = cells("events", event)
    assert (row["Last Seen"], row["First Seen"], row["Count"], row["Object"]) == (
        "10s",
        "60m",
        12,
        "node",
    )


def test_event_without_timestamps_falls_back_to_creation() -> None:
    event = {
        "metadata": {"name": "e3", "creationTimestamp": ts(timedelta(seconds=5))},
        "involvedObject": {"kind": "Pod", "name": "p"},
    }
    assert cells("events", event)["Last Seen"] == "5s"


def test_lease_row() -> None:
    lease = {
        "metadata": {"name": "cosched", "creationTimestamp": ts(timedelta(days=40))},
        "spec": {"holderIdentity": "cosched-0_7f3a", "leaseDurationSeconds": 15},
    }
    assert columns("leases") == [
        ("Name", "string", "name", 0),
        ("Holder", "string", "", 0),
        ("Age", "string", "", 0),
    ]
    assert cells("leases", lease) == {"Name": "cosched", "Holder": "cosched-0_7f3a", "Age": "40d"}
    assert cells("leases", {"metadata": {"name": "free"}, "spec": {}})["Holder"] == ""


def test_namespace_row() -> None:
    ns = {"metadata": {"name": "bench", "creationTimestamp": ts(timedelta(days=800))}}
    assert cells("namespaces", ns) == {"Name": "bench", "Status": "Active", "Age": "2y70d"}
    ns["status"] = {"phase": "Terminating"}
    assert cells("namespaces", ns)["Status"] == "Terminating"


def test_other_resources_get_name_and_age() -> None:
    pdb = {"metadata": {"name": "gang-pdb", "creationTimestamp": ts(timedelta(hours=20))}}
    assert columns("poddisruptionbudgets") == [
        ("Name", "string", "name", 0),
        ("Age", "string", "", 0),
    ]
    assert cells("poddisruptionbudgets", pdb) == {"Name": "gang-pdb", "Age": "20h"}


def test_rows_follow_the_order_of_the_objects() -> None:
    t = table("nodes", node("b"), node("a"), node("c"))
    assert [r["cells"][0] for r in t["rows"]] == ["b", "a", "c"]
