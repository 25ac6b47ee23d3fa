"""The serviceaccount and root-CA publisher controllers against a real API server (in-process client, FakeClock)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from kubelite.api.errors import ApiError
from kubelite.controllers.rootcacertpublisher import DESCRIPTION, DESCRIPTION_ANNOTATION, RootCACertPublisher
from kubelite.controllers.serviceaccount import ServiceAccountsController
from tests.controllers.harness import Harness, running

CA = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


async def _get(h: Harness, path: str) -> Any:
    try:
        return await h.client.get(path)
    except ApiError as exc:
        if exc.code == 404:
            return None
        raise


async def test_default_account_in_every_namespace_and_recreated(tmp_path: Path) -> None:
    async with running(tmp_path, ServiceAccountsController) as h:
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            await h.until(lambda ns=ns: _get(h, f"/api/v1/namespaces/{ns}/serviceaccounts/default"),
                          f"default account in {ns}")
        await h.client.create("/api/v1/namespaces", {"metadata": {"name": "team"}})
        await h.until(lambda: _get(h, "/api/v1/namespaces/team/serviceaccounts/default"), "account in a new namespace")
        await h.client.delete("/api/v1/namespaces/team/serviceaccounts/default")
        await h.until(lambda: _get(h, "/api/v1/namespaces/team/serviceaccounts/default"), "the account recreated")


async def test_no_account_in_a_terminating_namespace(tmp_path: Path) -> None:
    async with running(tmp_path) as h:  # the namespace controller is not running: it stays Terminating
        await h.client.create("/api/v1/namespaces", {"metadata": {"name": "gone"}})
        await h.client.delete("/api/v1/namespaces/gone")
    async with running(tmp_path, ServiceAccountsController) as h:
        await h.until(lambda: _get(h, "/api/v1/namespaces/default/serviceaccounts/default"), "the default namespace")
        assert await _get(h, "/api/v1/namespaces/gone/serviceaccounts/default") is None


async def test_root_ca_published_and_restored(tmp_path: Path) -> None:
    path = "/api/v1/namespaces/default/configmaps/kube-root-ca.crt"
    async with running(tmp_path, functools.partial(RootCACertPublisher, root_ca=CA)) as h:
        await h.until(lambda: _get(h, path), "kube-root-ca.crt")
        cm = await h.client.get(path)
        assert cm["data"] == {"ca.crt": CA.decode()}
        assert cm["metadata"]["annotations"] == {DESCRIPTION_ANNOTATION: DESCRIPTION}
        await h.client.request("PUT", path, {**cm, "data": {"ca.crt": "tampered"}})

        async def restored() -> bool:
            return bool((await h.client.get(path))["data"] == {"ca.crt": CA.decode()})
        await h.until(restored, "the bundle put back")
        await h.client.delete(path)
        await h.until(lambda: _get(h, path), "the ConfigMap recreated")
        await h.client.create("/api/v1/namespaces", {"metadata": {"name": "team"}})
        await h.until(lambda: _get(h, "/api/v1/namespaces/team/configmaps/kube-root-ca.crt"), "a new namespace")
