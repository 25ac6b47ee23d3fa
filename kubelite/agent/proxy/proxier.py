"""The service proxy: keeps this node's nftables rules equal to the Services and their ready endpoints.

Like kube-proxy it is an API client: informers on Services and EndpointSlices, and a sync that
runs whenever either changed (changes arriving during a sync are folded into the next one), so a
readiness change reaches the rules as soon as the EndpointSlice controller has written it. A
sync renders the whole table (rules.render) and applies it in one nft transaction only when it
differs from the last one applied. A failed apply is logged and retried with back-off on the
injected clock; the loop never ends on an error.

State on the host is one table per proxy process (nft.table_name). At start the proxy deletes
the tables of proxies that died without cleaning up (a crash, SIGKILL), and `cleanup` deletes
its own on a clean stop, so no rule outlives the agent that wrote it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubelite.agent.proxy import nft, rules
from kubelite.client.informer import Handlers, Informer
from kubelite.client.interface import Client
from kubelite.clock import Clock

log = logging.getLogger("kubelite.agent.proxy")

Obj = dict[str, Any]
RETRY_DELAY = 1.0
MAX_RETRY_DELAY = 30.0


class Proxier:
    def __init__(self, client: Client, clock: Clock, table: str | None = None, host: nft.Nft | None = None) -> None:
        self.clock = clock
        self.table = table or nft.table_name()
        self.host = host or nft.Nft()
        self._changed = asyncio.Event()
        handlers = Handlers(lambda o: self._changed.set(), lambda o, n: self._changed.set(),
                            lambda o: self._changed.set())
        self.services = Informer(client, "/api/v1/services", clock, handlers)
        self.slices = Informer(client, "/apis/discovery.k8s.io/v1/endpointslices", clock, handlers)
        self.applied = ""  # the script last applied
        self.syncs = 0  # applied syncs, for tests and benchmarks

    def ruleset(self) -> str:
        return rules.render(self.table, rules.service_ports(self.services.store.values(),
                                                            self.slices.store.values()))

    async def run(self) -> None:
        for name in await self.host.delete_orphans():
            log.info("deleted the rules of a proxy that is gone (%s)", name)
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(self.services.run())
            tasks.create_task(self.slices.run())
            await self.services.synced.wait()
            await self.slices.synced.wait()
            self._changed.set()
            await self._sync_loop()

    async def _sync_loop(self) -> None:
        delay = RETRY_DELAY
        while True:
            await self._changed.wait()
            self._changed.clear()
            script = self.ruleset()
            if script == self.applied:
                continue
            try:
                await self.host.apply(script)
            except Exception as exc:  # nft refused or failed: keep the old rules, try again later
                log.warning("applying service rules failed (retry in %.0f s): %s", delay, exc)
                await self.clock.sleep(delay)
                delay = min(delay * 2, MAX_RETRY_DELAY)
                self._changed.set()
                continue
            delay = RETRY_DELAY
            self.applied = script
            self.syncs += 1

    async def cleanup(self) -> None:
        """Remove this proxy's rules (a clean stop); safe to call when nothing was applied."""
        if self.applied:
            try:
                await self.host.delete_table(self.table)
            except nft.NftError as exc:
                log.warning("removing service rules failed: %s", exc)
        self.applied = ""
