"""`/healthz`, `/livez` and `/readyz`: named checks, as k8s.io/apiserver/pkg/server/healthz/healthz.go serves them.

Each root path runs its checks in order and answers 200 "ok" (with `?verbose`, one `[+]NAME ok` line per check
and "NAME check passed"), or 500 with every check's line and "[-]NAME failed: reason withheld" for the failing
ones (the roots are public; the reason goes to the log). `?exclude=NAME` (repeatable) skips a check. Each check
is also served on its own path (`/readyz/etcd`), which does tell the reason, and like any other path needs
authorization (only the roots are public).

The checks (upstream's names): ping; log (the log's handlers flush); etcd, in every root, and etcd-readiness, in
/readyz — a real, time-bounded probe of the store, shared by both and run at most once a `PROBE_INTERVAL`
(load balancers call these every second; concurrent callers wait for the one probe in flight); informer-sync
and shutdown, in /readyz. Upstream's poststarthook/* checks are not served: this server has no post-start hooks
that outlive `ApiServer.start`, which runs before any request (informer-sync stands for it).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field

from aiohttp import web

from kubelite.clock import Clock
from kubelite.store.interface import Store

log = logging.getLogger("kubelite.apiserver.healthz")

ROOTS = ("healthz", "livez", "readyz")
PROBE_TIMEOUT = 2.0  # upstream's --etcd-healthcheck-timeout and --etcd-readycheck-timeout defaults
PROBE_GRACE = 0.5  # beyond PROBE_TIMEOUT, before the probe is abandoned by this side
PROBE_INTERVAL = 1.0  # upstream's rate limit: one probe per timeout/2, callers in between get the last result
LOG_FLUSH_INTERVAL = 60.0  # upstream's log check flushes once a minute ...
LOG_MAX_DELAY = 120.0  # ... and fails when the last flush finished longer ago than this ("logging blocked")


class CheckFailed(Exception):
    """A health check's failure; its text is the reason, for the log and the per-check path."""


@dataclass(frozen=True)
class Check:
    name: str
    run: Callable[[], Awaitable[None]]  # raises (anything) when unhealthy


async def ping() -> None:
    """upstream's PingHealthz: the server answers at all."""


@dataclass
class StoreProbe:
    """The store's health, probed at most once a `PROBE_INTERVAL` with a `PROBE_TIMEOUT` bound: a second of
    load-balancer calls costs one round trip to etcd, and a stopped etcd holds a caller `PROBE_TIMEOUT` at most.
    Each failing probe is logged once, as one line (the reason is withheld from the public roots)."""

    store: Store
    clock: Clock
    _last: float | None = field(default=None, init=False)
    _error: str | None = field(default=None, init=False)
    _inflight: asyncio.Future[str | None] | None = field(default=None, init=False)

    async def check(self) -> None:
        if self._last is None or self.clock.monotonic() - self._last >= PROBE_INTERVAL:
            if self._inflight is None:
                self._inflight = asyncio.ensure_future(self._probe())
            await asyncio.shield(self._inflight)
        if self._error is not None:
            raise CheckFailed(self._error)

    async def _probe(self) -> str | None:
        try:  # the store bounds its own probe; this bound backs it up (a store that ignores `timeout`)
            await asyncio.wait_for(self.store.health(PROBE_TIMEOUT), PROBE_TIMEOUT + PROBE_GRACE)
            self._error = None
        except TimeoutError:
            self._error = f"the store did not answer within {PROBE_TIMEOUT + PROBE_GRACE:g}s"
            log.warning("storage health probe failed: %s", self._error)
        except Exception as exc:  # any failure is the store's unhealth, never the check's crash
            self._error = str(exc) or type(exc).__name__
            log.warning("storage health probe failed: %s", self._error)
        finally:
            self._last = self.clock.monotonic()
            self._inflight = None
        return self._error


class LogFlusher:
    """upstream's LogHealthz: a thread flushes the root logger's handlers every `LOG_FLUSH_INTERVAL`; the check
    fails when the last flush finished more than `LOG_MAX_DELAY` ago (a handler blocked on a full pipe or a hung
    disk). A thread, because such a flush blocks; started by the first check, as upstream's."""

    def __init__(self, clock: Clock, interval: float = LOG_FLUSH_INTERVAL, max_delay: float = LOG_MAX_DELAY) -> None:
        self._clock = clock
        self._interval = interval
        self._max_delay = max_delay
        self._verified = clock.monotonic()
        self._started = False
        self._stop = threading.Event()

    async def check(self) -> None:
        if not self._started:
            self._started = True
            self._verified = self._clock.monotonic()
            threading.Thread(target=self._flush_loop, name="log-health", daemon=True).start()
        if self._clock.monotonic() - self._verified > self._max_delay:
            raise CheckFailed("logging blocked")

    def _flush_loop(self) -> None:
        while not self._stop.is_set():
            for handler in logging.getLogger().handlers:
                try:
                    handler.flush()
                except Exception:  # a handler that raises is not blocked: the check is about blocking
                    continue
            self._verified = self._clock.monotonic()
            self._stop.wait(self._interval)

    def stop(self) -> None:
        self._stop.set()


@dataclass
class Health:
    """The named checks of each root, in upstream's order."""

    checks: Mapping[str, tuple[Check, ...]]

    async def serve(self, request: web.Request, path: str) -> web.Response | None:
        """The answer to a health path, or None when `path` is none."""
        parts = path.strip("/").split("/")
        if parts[0] not in self.checks or len(parts) > 2:
            return None
        checks = self.checks[parts[0]]
        if len(parts) == 1:
            return await self._root(parts[0], checks, request.query.getall("exclude", []),
                                    "verbose" in request.query)
        check = next((c for c in checks if c.name == parts[1]), None)
        return await _single(check) if check is not None else None

    async def _root(self, root: str, checks: Iterable[Check], exclude: Iterable[str],
                    verbose: bool) -> web.Response:
        """handleRootHealth."""
        excluded = set(exclude)
        lines: list[str] = []
        failed: list[str] = []
        for check in checks:
            if check.name in excluded:
                excluded.discard(check.name)
                lines.append(f"[+]{check.name} excluded: ok")
            elif await _failure(check) is None:
                lines.append(f"[+]{check.name} ok")
            else:  # the root is public: the reason stays in the log (the probe logged it)
                lines.append(f"[-]{check.name} failed: reason withheld")
                failed.append(check.name)
        if excluded:
            names = ",".join(f'"{n}"' for n in sorted(excluded))
            lines.append(f"warn: some health checks cannot be excluded: no matches for {names}")
            log.warning("cannot exclude some health checks, no health checks are installed matching %s", names)
        if failed:
            log.debug("%s check failed: %s", ",".join(failed), root)
            return _text("".join(f"{line}\n" for line in lines) + f"{root} check failed\n", 500)
        if not verbose:
            return _text("ok", 200)
        return _text("".join(f"{line}\n" for line in lines) + f"{root} check passed\n", 200)


async def _failure(check: Check) -> str | None:
    """Why `check` fails, or None when it passes."""
    try:
        await check.run()
    except Exception as exc:  # any failure of the check is its answer, never a crash of the handler
        return str(exc) or type(exc).__name__
    return None


async def _single(check: Check) -> web.Response:
    """adaptCheckToHandler: one check on its own path, with its reason (this path is not public)."""
    reason = await _failure(check)
    return _text("ok", 200) if reason is None else _text(f"internal server error: {reason}\n", 500)


def _text(body: str, status: int) -> web.Response:
    resp = web.Response(text=body, status=status, charset="utf-8")
    resp.headers["X-Content-Type-Options"] = "nosniff"
    return resp


def standard(store_probe: StoreProbe, log_check: LogFlusher, ready: Callable[[], bool],
             stopping: Callable[[], bool]) -> Health:
    """kube-apiserver's checks: ping, log and etcd in every root; /readyz adds etcd-readiness (here the same probe:
    both ask etcd whether it answers a read in time), informer-sync and shutdown."""

    async def informer_sync() -> None:
        if not ready():
            raise CheckFailed("the watch caches have not synced")

    async def shutdown() -> None:
        if stopping():
            raise CheckFailed("process is shutting down")

    live = (Check("ping", ping), Check("log", log_check.check), Check("etcd", store_probe.check))
    return Health({
        "healthz": live,
        "livez": live,
        "readyz": (*live, Check("etcd-readiness", store_probe.check), Check("informer-sync", informer_sync),
                   Check("shutdown", shutdown)),
    })
