"""Server-side printing tables, mirroring TestPrintPod / TestPrintPodwide in printers_test.go."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kubelite.apiserver.tables import human_duration, row
from kubelite.clock import parse_rfc3339

NOW = parse_rfc3339("2026-11-22T12:00:00Z")
Obj = dict[str, Any]


def _pod(spec: Obj | None = None, status: Obj | None = None, meta: Obj | None = None) -> Obj:
    return {"metadata": {"name": "test1", "creationTimestamp": "2026-11-22T11:59:00Z", **(meta or {})},
            "spec": spec or {"containers": [{"name": "a"}, {"name": "b"}]}, "status": status or {}}


def _cs(name: str, **state: Any) -> Obj:
    return {"name": name, "restartCount": state.pop("restarts", 0), "ready": state.pop("ready", False),
            "state": state}


@dataclass(frozen=True)
class Case:
    name: str
    pod: Obj
    want: list[Any]


# Mirrors TestPrintPod, pkg/printers/internalversion/printers_test.go.
CASES = [
    Case("pending phase", _pod(status={"phase": "Pending"}), ["test1", "0/2", "Pending", "0", "60s"]),
    Case("running with restarts", _pod(status={"phase": "Running", "containerStatuses": [
        _cs("a", ready=True, restarts=3, running={}), _cs("b", ready=True, running={})]}),
         ["test1", "2/2", "Running", "3", "60s"]),
    Case("container waiting reason wins", _pod(status={"phase": "Running", "containerStatuses": [
        _cs("a", waiting={"reason": "CrashLoopBackOff"}, restarts=5), _cs("b", ready=True, running={})]}),
         ["test1", "1/2", "CrashLoopBackOff", "5", "60s"]),
    Case("terminated exit code without reason", _pod(status={"phase": "Failed", "containerStatuses": [
        _cs("a", terminated={"exitCode": 3}), _cs("b", terminated={"exitCode": 0, "reason": "Completed"})]}),
         ["test1", "0/2", "ExitCode:3", "0", "60s"]),
    Case("init container progress", _pod(
        spec={"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "a"}]},
        status={"phase": "Pending", "initContainerStatuses": [
            _cs("i1", terminated={"exitCode": 0}), _cs("i2", running={})]}),
         ["test1", "0/1", "Init:1/2", "0", "60s"]),
    Case("init container failed", _pod(
        spec={"initContainers": [{"name": "i1"}], "containers": [{"name": "a"}]},
        status={"phase": "Failed", "initContainerStatuses": [_cs("i1", terminated={"exitCode": 1,
                                                                                   "reason": "Error"})]}),
         ["test1", "0/1", "Init:Error", "0", "60s"]),
    Case("sidecar counts toward ready", _pod(
        spec={"initContainers": [{"name": "s", "restartPolicy": "Always"}], "containers": [{"name": "a"}]},
        status={"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
                "initContainerStatuses": [{**_cs("s", running={}, ready=True), "started": True}],
                "containerStatuses": [_cs("a", running={}, ready=True)]}),
         ["test1", "2/2", "Running", "0", "60s"]),
    Case("terminating", _pod(status={"phase": "Running"}, meta={"deletionTimestamp": "2026-11-22T12:00:30Z"}),
         ["test1", "0/2", "Terminating", "0", "60s"]),
    Case("scheduling gated", _pod(status={"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}),
         ["test1", "0/2", "SchedulingGated", "0", "60s"]),
    Case("restart with last termination", _pod(status={"phase": "Running", "containerStatuses": [
        {**_cs("a", running={}, ready=True, restarts=1),
         "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2026-11-22T11:55:00Z"}}}]}),
         ["test1", "1/2", "Running", "1 (5m ago)", "60s"]),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_print_pod(case: Case) -> None:
    assert row("Pod", case.pod, NOW, "Metadata")["cells"][:5] == case.want


@pytest.mark.parametrize("seconds,want", [(-5, "<invalid>"), (0, "0s"), (119, "119s"), (150, "2m30s"),
                                          (600, "10m"), (3 * 3600, "3h"), (3 * 3600 + 60, "3h1m"),
                                          (30 * 3600, "30h"), (50 * 3600, "2d2h"), (400 * 86400, "400d"),
                                          (3 * 365 * 86400, "3y")])
def test_human_duration(seconds: int, want: str) -> None:
    assert human_duration(seconds) == want


# printCertificateSigningRequest / extractCSRStatus (printers.go), by what each row shows
@pytest.mark.parametrize("spec,status,cells", [
    pytest.param({"signerName": "kubernetes.io/kube-apiserver-client-kubelet", "username": "system:bootstrap:abcdef"},
                 {}, ["kubernetes.io/kube-apiserver-client-kubelet", "system:bootstrap:abcdef", "<none>", "Pending"],
                 id="pending, no requested duration"),
    pytest.param({"signerName": "kubernetes.io/kube-apiserver-client", "username": "alice", "expirationSeconds": 86400},
                 {"conditions": [{"type": "Approved"}], "certificate": "Y2VydA=="},
                 ["kubernetes.io/kube-apiserver-client", "alice", "24h", "Approved,Issued"],
                 id="approved and issued, 24h requested"),
    pytest.param({"username": "bob"}, {"conditions": [{"type": "Approved"}, {"type": "Denied"}, {"type": "Failed"}]},
                 ["<none>", "bob", "<none>", "Denied,Failed"], id="denied wins over approved; failed is added"),
])
def test_print_certificate_signing_request(spec: dict[str, object], status: dict[str, object],
                                           cells: list[str]) -> None:
    csr = {"metadata": {"name": "csr-1", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": spec, "status": status}
    out = row("CertificateSigningRequest", csr, parse_rfc3339("2026-01-01T00:01:00Z"), "None")
    assert out["cells"] == ["csr-1", "60s", *cells]
