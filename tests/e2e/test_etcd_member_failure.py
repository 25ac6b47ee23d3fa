"""A `kubelite server --store etcd://…` on a 3-member etcd keeps serving when a member dies (G2, issue 12).

Writers create pods throughout; the etcd leader is SIGKILLed mid-run. The API must keep
acknowledging writes afterwards (the store's calls and its watch move to the surviving members;
acknowledgements wait for the watch cache, so the watch resumed too), and every acknowledged
write must be in etcd: a second server started afterwards on the two survivors lists them all.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import start_server
from tests.e2e.writers import AcknowledgedCreates, stored_pods
from tests.etcd_cluster import EtcdCluster

pytestmark = pytest.mark.e2e
WRITERS = 6


def _leader(cluster: EtcdCluster) -> int:
    out = subprocess.run(["etcdctl", "--endpoints", ",".join(cluster.endpoints), "endpoint", "status", "-w", "json"],
                         capture_output=True, text=True, check=True, timeout=10,
                         env={"ETCDCTL_API": "3", "PATH": "/usr/bin:/bin"}).stdout
    statuses = json.loads(out)
    for i, st in enumerate(statuses):
        if st["Status"]["leader"] == st["Status"]["header"]["member_id"]:
            return i
    raise AssertionError(f"no leader in {out}")


def test_killing_the_etcd_leader_loses_no_acknowledged_write(tmp_path: Path) -> None:
    cluster = EtcdCluster(tmp_path / "etcd", 3)
    (tmp_path / "etcd").mkdir()
    cluster.start()
    server = start_server(tmp_path / "data", tmp_path / "home", insecure=True,
                          extra=["--store", cluster.url, "--disable", "scheduler"])
    try:
        with AcknowledgedCreates(server.port, WRITERS) as load:
            time.sleep(1.5)
            killed = _leader(cluster)
            cluster.kill(killed)
            killed_at = time.monotonic()
            time.sleep(5)
        before = load.count(before=killed_at)
        after = load.count(after=killed_at + 3)  # a new leader, writes retried on it
        assert before > 30, "the load never got going"
        assert after > 30, f"the API stopped serving writes after the etcd leader died ({after} acknowledged)"
        server.stop()

        survivors = [e for i, e in enumerate(cluster.endpoints) if i != killed]
        second = start_server(tmp_path / "data2", tmp_path / "home2", insecure=True,
                              extra=["--store", "etcd://" + ",".join(survivors), "--disable", "scheduler"])
        try:
            missing = load.missing(stored_pods(second.port))
            assert missing == [], f"{len(missing)} of {len(load.acked)} acknowledged writes lost"
        finally:
            second.stop()
    finally:
        server.stop()
        cluster.stop()
