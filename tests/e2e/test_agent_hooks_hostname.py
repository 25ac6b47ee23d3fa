"""Node-agent differences from kubelet 1.32 a QA pass found, end to end with `kubelite up`, real kubectl and real
sandboxed processes, as `kubectl describe` and the pod's status show them:

- a failed postStart hook (kuberuntime_container.go startContainer): a FailedPostStartHook event with its fixed
  text (never the hook's output), the container killed with a Killing event "FailedPostStartHook", and — under
  restartPolicy Never — left Terminated by the stop signal;
- `setHostnameAsFQDN`: the container's HOSTNAME is the pod's FQDN (hostname.subdomain.namespace.svc.cluster.local),
  and an FQDN over 64 characters keeps the pod ContainerCreating with kubelet's FailedCreatePodSandBox event.
"""

from __future__ import annotations

import re

import pytest

from tests.conftest import ServerProcess
from tests.e2e.pods import apply_pod, container_status, sh, wait_for

pytestmark = pytest.mark.e2e

LOOP = "while true; do sleep 0.2; done"


def _described(up: ServerProcess, name: str, *patterns: str) -> str:
    """`kubectl describe pod` once it shows every pattern (events are posted after the status)."""
    out = ""

    def shown() -> bool:
        nonlocal out
        out = up.kubectl("describe", "pod", name).stdout
        return all(re.search(p, out) for p in patterns)

    assert wait_for(shown), out
    return out


def test_failed_post_start_hook_kills_the_container(up: ServerProcess) -> None:
    # the hook fails after a second: a stop signal sent within milliseconds of the spawn can still be lost while
    # the process runtime's shim has not forked the container yet (then only SIGKILL ends it: exit code 137)
    hook = {"postStart": {"exec": {"command": ["sh", "-c", "sleep 1; echo password=hunter2; exit 1"]}}}
    apply_pod(up, "poststart", [sh("main", f"trap 'exit 3' TERM; {LOOP}", lifecycle=hook)], restartPolicy="Never",
              terminationGracePeriodSeconds=2)
    assert wait_for(lambda: "terminated" in container_status(up, "poststart", "main").get("state", {}))
    terminated = container_status(up, "poststart", "main")["state"]["terminated"]
    assert (terminated["reason"], terminated["exitCode"]) == ("Error", 3)  # the stop signal ended it
    out = _described(up, "poststart", r"Warning\s+FailedPostStartHook\s+.*kubelet\s+PostStartHook failed",
                     r"Normal\s+Killing\s+.*kubelet\s+FailedPostStartHook")
    assert re.search(r"State:\s+Terminated\s+Reason:\s+Error\s+Exit Code:\s+3", out), out
    assert "hunter2" not in out
    up.kubectl("delete", "pod", "poststart", "--grace-period=1")


def test_set_hostname_as_fqdn(up: ServerProcess) -> None:
    apply_pod(up, "fqdn", [sh("main", LOOP)], hostname="web-3", subdomain="web", setHostnameAsFQDN=True)
    assert wait_for(lambda: container_status(up, "fqdn", "main").get("ready") is True)
    res = up.kubectl("exec", "fqdn", "--", "sh", "-c", "echo $HOSTNAME")
    assert res.stdout == "web-3.web.default.svc.cluster.local\n"
    long = "h" * 40  # h….web.default.svc.cluster.local: 40 + 1 + 29 = 70 characters
    apply_pod(up, "fqdn-long", [sh("main", LOOP)], hostname=long, subdomain="web", setHostnameAsFQDN=True)
    out = _described(up, "fqdn-long", r"FailedCreatePodSandBox")
    assert re.search(
        rf"Warning\s+FailedCreatePodSandBox\s+.*kubelet\s+Failed to create pod sandbox: failed to construct FQDN from "
        rf"pod hostname and cluster domain, FQDN {long}\.web\.default\.svc\.cluster\.local is too long \(64 "
        r"characters is the max, 70 characters requested\)", out), out
    assert re.search(r"State:\s+Waiting\s+Reason:\s+ContainerCreating", out), out
    up.kubectl("delete", "pod", "fqdn", "fqdn-long", "--grace-period=1")
