"""The pod worker: the only writer of one pod's processes (kubelet's podWorkers + syncPod, simplified).

A level-triggered loop: each pass compares what the pod asks for with what runs, starts
or restarts containers (init containers one at a time, sidecars kept running, then app
containers), and publishes the status; it sleeps until a container exits, the pod object
changes or a backoff ends. On deletion it stops app containers, then sidecars in reverse
order, with the grace arithmetic of seed 003, writes the terminal phase and only then
deletes the object with grace 0.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubelite.agent import checkpoint
from kubelite.agent import container as cspec
from kubelite.agent.cgroups import Limits
from kubelite.agent.hooks import run_handler
from kubelite.agent.lifecycle import Backoff, ContainerView, phase, should_restart
from kubelite.agent.prober import Prober, ProbeState
from kubelite.agent.runtime import Exit, Handle
from kubelite.api.podresources import CPU, MEMORY, resource_list
from kubelite.clock import bounded, parse_rfc3339, rfc3339

if TYPE_CHECKING:
    from kubelite.agent.agent import Agent

log = logging.getLogger("kubelite.agent")

Obj = dict[str, Any]
MIN_STOP_WINDOW = 2.0
DEADLINE_EXCEEDED = "DeadlineExceeded"


@dataclass
class Record:
    spec: Obj
    kind: str  # init | sidecar | app
    process: Handle | None = None
    restarts: int = 0
    started_at: float = 0.0
    exit: Exit | None = None
    finished_at: float = 0.0
    last_terminated: Obj | None = None
    waiting: str = "ContainerCreating"
    waiting_message: str = ""
    not_before: float = 0.0
    backoff: Backoff = field(default_factory=Backoff)
    ever_started: bool = False
    backoff_reported: int = -1
    prober: Prober | None = None
    starting: str | None = None  # the log path of an instance being spawned (checkpointed before the spawn)

    @property
    def ready(self) -> bool:
        return self.running and (self.prober is None or self.prober.state.ready)

    @property
    def started(self) -> bool:
        return self.running and (self.prober is None or self.prober.state.started)

    @property
    def name(self) -> str:
        return str(self.spec["name"])

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.alive

    def checkpoint(self) -> Obj:
        return {"restarts": self.restarts, "startedAt": self.started_at, "everStarted": self.ever_started,
                "exit": [self.exit.code, self.exit.oom_killed] if self.exit else None,
                "finishedAt": self.finished_at, "lastTerminated": self.last_terminated, "notBefore": self.not_before,
                "backoff": self.backoff.delay, "waiting": [self.waiting, self.waiting_message],
                "process": self.process.checkpoint() if self.process is not None and self.process.alive else None,
                "starting": self.starting}

    def restore(self, saved: Obj) -> None:
        self.restarts, self.started_at = int(saved["restarts"]), float(saved["startedAt"])
        self.ever_started, self.finished_at = bool(saved["everStarted"]), float(saved["finishedAt"])
        self.exit = Exit(*saved["exit"]) if saved["exit"] else None
        self.last_terminated, self.not_before = saved["lastTerminated"], float(saved["notBefore"])
        self.backoff.delay = float(saved["backoff"])
        self.waiting, self.waiting_message = saved["waiting"]


class PodWorker:
    def __init__(self, agent: Agent, pod: Obj, saved: Obj | None = None) -> None:
        self.agent = agent
        self.pod = pod
        self.saved = saved  # a previous agent's checkpoint of this pod: its processes are re-adopted
        self.uid = pod["metadata"]["uid"]
        self.wake = asyncio.Event()
        self.gone = False  # the object was removed (force delete): kill, write nothing
        spec = pod["spec"]
        self.records = [Record(c, "sidecar" if c.get("restartPolicy") == "Always" else "init")
                        for c in spec.get("initContainers") or []]
        self.records += [Record(c, "app") for c in spec.get("containers") or []]
        for r in self.records:
            r.backoff = Backoff(agent.config.max_restart_period, agent.config.initial_backoff)
        self.init_failed = False
        self.initialized = False  # every init container has completed once; restarts of sidecars no longer block
        self.started_at = agent.clock.now()
        self._written: Obj | None = None
        self._terminating_since = 0.0
        self._stop_deadline = float("inf")
        self._transitions: dict[str, tuple[str, str]] = {}
        self._checkpointed: Obj | None = None
        self.failure: tuple[str, str] | None = None  # (reason, message) when the agent failed the pod
        self.eviction: tuple[int, str, str] | None = None  # (grace, reason, message): node-pressure eviction

    # --- inputs ----------------------------------------------------------------------------------

    def update(self, pod: Obj) -> None:
        self.pod = pod
        self.wake.set()

    def removed(self) -> None:
        self.gone = True
        self.wake.set()

    def evict(self, grace: int, reason: str, message: str) -> bool:
        """Node-pressure eviction: stop the pod with `grace` seconds and leave it Failed with reason/message."""
        if self.eviction is not None or self.gone or self.pod["metadata"].get("deletionTimestamp"):
            return False
        self.eviction = (grace, reason, message)
        self.wake.set()
        return True

    @property
    def logs_dir(self) -> Path:
        meta = self.pod["metadata"]
        return Path(self.agent.data_dir) / "pods" / f"{meta['namespace']}_{meta['name']}_{self.uid}"

    def log_path(self, name: str, restarts: int) -> Path:
        return self.logs_dir / name / f"{restarts}.log"

    # --- the loop --------------------------------------------------------------------------------

    async def run(self) -> None:
        try:
            if self.saved is not None:
                self._adopt(self.saved)
            else:
                refusal = self.agent.admit(self.pod)
                if refusal is not None:
                    await self._refuse(*refusal)
                    return
            while not self.gone and not self.pod["metadata"].get("deletionTimestamp"):
                if self._past_deadline():
                    await self._fail(DEADLINE_EXCEEDED, "Pod was active on the node longer than the specified "
                                                        "deadline")
                    break
                if self.eviction is not None:
                    await self._fail(*self.eviction[1:])
                    break
                await self._sync()
                if self._terminal():
                    await self._finish()
                    break
                await self._sleep_until_change()
            else:
                await self._terminate()
            checkpoint.remove(self.logs_dir)  # every process has ended
        except asyncio.CancelledError:
            self._kill_all()  # the checkpoint stays: a restarted agent learns these containers were killed
            raise
        except Exception:
            log.exception("pod worker %s", self.uid)
            self._kill_all()

    def _adopt(self, saved: Obj) -> None:
        """Take over from a previous agent: its records, its live processes, the published conditions."""
        self.init_failed, self.initialized = bool(saved.get("initFailed")), bool(saved.get("initialized"))
        containers = saved.get("containers") or {}
        for r in self.records:
            entry = containers.get(r.name)
            if entry is None:
                continue
            r.restore(entry)
            r.process = checkpoint.recover(self.agent.runtime, entry)
            if r.process is not None:
                if entry.get("starting"):  # the previous agent died while spawning this instance
                    r.started_at, r.ever_started, r.waiting = r.process.started, True, ""
                if r.process.alive:
                    published = self._published_status(r.name)
                    self._probe(r, resumed=ProbeState(bool(published.get("started")), bool(published.get("ready"))))
                    self.agent.watch(self._watch(r, r.process))
                else:
                    assert r.process.result is not None
                    self._record_exit(r, r.process.result)
        status = self.pod.get("status") or {}
        if status.get("startTime"):
            self.started_at = float(parse_rfc3339(status["startTime"]))
        for c in status.get("conditions") or []:
            self._transitions[c.get("type", "")] = (c.get("status", ""), c.get("lastTransitionTime", ""))
        log.info("pod %s/%s: re-adopted %d live container(s)", self.pod["metadata"]["namespace"],
                 self.pod["metadata"]["name"], sum(1 for r in self.records if r.running))

    def _save(self) -> None:
        data = {"uid": self.uid, "namespace": self.pod["metadata"]["namespace"],
                "name": self.pod["metadata"]["name"], "initFailed": self.init_failed,
                "initialized": self.initialized,
                "containers": {r.name: r.checkpoint() for r in self.records}}
        if data != self._checkpointed:
            self._checkpointed = data
            checkpoint.save(self.logs_dir, data)

    def _active_deadline(self) -> float | None:
        seconds = self.pod["spec"].get("activeDeadlineSeconds")
        return None if seconds is None else self.started_at + float(seconds)

    def _past_deadline(self) -> bool:
        """kubelet's activeDeadlineHandler: the pod has been active longer than spec.activeDeadlineSeconds."""
        deadline = self._active_deadline()
        return deadline is not None and self.agent.clock.now() >= deadline

    async def _fail(self, reason: str, message: str) -> None:
        """Stop every container with the pod's grace period and leave the pod Failed with `reason` (not deleted)."""
        self.agent.event(self.pod, reason, message, "Warning")
        self.failure = (reason, message)
        await self._stop_all()
        await self._publish(False, final=True)

    async def _sleep_until_change(self) -> None:
        self.wake.clear()
        now = self.agent.clock.now()
        pending = [r.not_before for r in self.records if r.not_before > now]
        deadline = self._active_deadline()
        if deadline is not None:
            pending.append(deadline)
        if not pending:
            await self.wake.wait()
            return
        await bounded(self.agent.clock, self.wake.wait(), min(pending) - self.agent.clock.now())

    async def _sync(self) -> None:
        policy = self.pod["spec"].get("restartPolicy", "Always")
        initializing = False
        for r in self.records:
            if r.kind == "sidecar":  # the next init container waits until the sidecar has started (L7)
                if not r.running:
                    await self._start_or_restart(r, restart=r.ever_started)
                if not r.started and not self.initialized:
                    initializing = True
                    break
                continue
            if r.kind == "init":
                if self.initialized or (r.exit is not None and r.exit.code == 0 and not r.running):
                    continue
                initializing = True
                if r.running:
                    break
                if r.exit is not None:  # failed: restarted unless its (or the pod's) policy and rules say no
                    if not should_restart(policy, r.spec, r.exit.code):
                        self.init_failed = True
                        break
                    await self._start_or_restart(r, restart=True)
                else:
                    await self._start_or_restart(r, restart=False)
                break
        self.initialized = self.initialized or (not initializing and not self.init_failed)
        if self.initialized:
            for r in self.records:
                if r.kind != "app" or r.running:
                    continue
                if r.exit is None:
                    await self._start_or_restart(r, restart=False)
                elif should_restart(policy, r.spec, r.exit.code):
                    await self._start_or_restart(r, restart=True)
        self._save()
        await self._publish(initializing)

    def _terminal(self) -> bool:
        return self._phase() in ("Succeeded", "Failed")

    # --- containers ------------------------------------------------------------------------------

    async def _start_or_restart(self, r: Record, restart: bool) -> None:
        now = self.agent.clock.now()
        if restart and now < r.not_before:
            if r.backoff_reported != r.restarts:  # one BackOff event per back-off period, as kubelet
                r.backoff_reported = r.restarts
                self.agent.event(self.pod, "BackOff", f"Back-off restarting failed container {r.name} in pod "
                                                      f"{self.pod['metadata']['name']}", "Warning")
            r.waiting = "CrashLoopBackOff"
            r.waiting_message = (f"back-off {int(r.not_before - r.finished_at)}s restarting failed "
                                 f"container={r.name} pod={self.pod['metadata']['name']}_"
                                 f"{self.pod['metadata']['namespace']}({self.uid})")
            return
        try:
            env = cspec.environment(self.pod, r.spec, self.agent.host_ip, self.agent.base_env)
            argv = cspec.sandboxed(cspec.argv(r.spec, env, self.agent.config.image_catalog), self.pod, r.spec,
                                   self.logs_dir / "volumes")
        except cspec.ConfigError as exc:
            if r.waiting != "CreateContainerConfigError":
                self.agent.event(self.pod, "Failed", f"Error: {exc}", "Warning")
            r.waiting, r.waiting_message = "CreateContainerConfigError", str(exc)
            return
        if restart:
            r.restarts += 1
        r.starting = str(self.log_path(r.name, r.restarts))
        self._save()  # before the spawn: an agent killed right after it still finds the process (runtime.find)
        try:
            r.process = await self.agent.runtime.start(argv, env, r.spec.get("workingDir"), Path(r.starting),
                                                       self._limits(r))
        except OSError as exc:
            r.waiting, r.waiting_message = "RunContainerError", str(exc)
            r.exit, r.finished_at = Exit(128), now
            self.agent.event(self.pod, "Failed", f"Error: {exc}", "Warning")
            return
        finally:
            r.starting = None
        r.started_at, r.ever_started, r.waiting = self.agent.clock.now(), True, ""
        self._save()
        self.agent.event(self.pod, "Created", f"Created container {r.name}")
        self.agent.event(self.pod, "Started", f"Started container {r.name}")
        self.agent.watch(self._watch(r, r.process))
        post = (r.spec.get("lifecycle") or {}).get("postStart")
        if post:
            ok, message = await run_handler(post, r.spec, env, self.agent.host_ip, self.agent.clock)
            if not ok:
                self.agent.event(self.pod, "FailedPostStartHook", f"PostStart hook for container {r.name} failed: "
                                                                  f"{message}", "Warning")
                self.agent.runtime.kill(r.process)
                return
        self._probe(r, env)

    def _probe(self, r: Record, env: dict[str, str] | None = None, resumed: ProbeState | None = None) -> None:
        if env is None:
            env = cspec.environment(self.pod, r.spec, self.agent.host_ip, self.agent.base_env)
        r.prober = Prober(self.agent.clock, r.spec, env, self.agent.host_ip, r.started_at, self.wake.set,
                          functools.partial(self._unhealthy, r), resumed)

    def _published_status(self, name: str) -> Obj:
        """The container's status as the API object has it (what a previous agent published)."""
        status = self.pod.get("status") or {}
        return next((c for c in (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])
                     if c.get("name") == name), {})

    def _limits(self, r: Record) -> Limits:
        resources = r.spec.get("resources") or {}
        limits = resource_list(resources.get("limits"))
        requests = resource_list(resources.get("requests"))
        return Limits(f"pod{self.uid}", limits.get(MEMORY), limits.get(CPU), requests.get(CPU, limits.get(CPU, 0)))

    def _unhealthy(self, r: Record, kind: str, message: str, grace: float | None) -> None:
        """A failed probe: an event; on a liveness/startup verdict, kill the container (restart policy applies)."""
        self.agent.event(self.pod, "Unhealthy", f"{kind} probe failed: {message}".strip(), "Warning")
        if grace is None or r.process is None or not r.running:
            return
        period = grace if grace >= 0 else self.grace_period()
        self.agent.event(self.pod, "Killing", f"Container {r.name} failed {kind.lower()} probe, will be restarted")
        self.agent.watch(self._kill_after_probe(r, r.process, period))

    async def _kill_after_probe(self, r: Record, p: Handle, grace: float) -> None:
        stop = (r.spec.get("lifecycle") or {}).get("stopSignal") or "SIGTERM"
        self.agent.runtime.signal(p, getattr(signal, stop, signal.SIGTERM))
        finished, _ = await bounded(self.agent.clock, p.exited(), max(1.0, grace))
        if not finished:
            self.agent.runtime.kill(p)

    async def _watch(self, r: Record, p: Handle) -> None:
        result = await self.agent.runtime.wait(p)
        if r.process is p:
            self._record_exit(r, result)

    def _record_exit(self, r: Record, result: Exit) -> None:
        if r.prober is not None:
            r.prober.stop()
        now = self.agent.clock.now()
        r.exit, r.finished_at = result, now
        r.last_terminated = self._terminated_state(r)
        r.not_before = r.backoff.next_restart(now, now - r.started_at)
        r.waiting = "CrashLoopBackOff" if r.not_before > now else ""
        self.wake.set()

    def _terminated_state(self, r: Record) -> Obj:
        assert r.exit is not None
        reason = "OOMKilled" if r.exit.oom_killed else "Completed" if r.exit.code == 0 else "Error"
        return {"exitCode": r.exit.code, "reason": reason, "startedAt": rfc3339(r.started_at),
                "finishedAt": rfc3339(r.finished_at), "containerID": f"kubelite://{r.process.pid if r.process else 0}"}

    def _kill_all(self) -> None:
        for r in self.records:
            if r.running and r.process is not None:
                self.agent.runtime.kill(r.process)

    # --- termination (L12-L16) -------------------------------------------------------------------

    def grace_period(self) -> float:
        """calculateEffectiveGracePeriod (seed 003): the deletion's period, else the spec's; at least 1 s."""
        meta, spec = self.pod["metadata"], self.pod["spec"]
        if self.eviction is not None:
            return float(max(1, self.eviction[0]))
        grace = meta.get("deletionGracePeriodSeconds")
        if grace is None:
            grace = spec.get("terminationGracePeriodSeconds", 30)
        return float(max(1, int(grace)))

    def _deadline(self) -> float:
        """Termination start + grace; a later, shorter DELETE moves it earlier (never later)."""
        candidate = self._terminating_since + self.grace_period()
        if self.gone:  # force-deleted meanwhile: a short grace from now
            candidate = min(candidate, self.agent.clock.now() + MIN_STOP_WINDOW)
        self._stop_deadline = min(self._stop_deadline, candidate)
        return self._stop_deadline

    async def _stop_container(self, r: Record) -> None:
        """preStop (time spent is deducted), then the stop signal, then SIGKILL when the window ends.

        Every container gets at least MIN_STOP_WINDOW after its stop signal: this is also the
        one-time 2 s extension when the preStop hook overran the grace period.
        """
        if not r.running or r.process is None:
            return
        p = r.process
        pre = (r.spec.get("lifecycle") or {}).get("preStop")
        if pre and not self.gone:
            env = cspec.environment(self.pod, r.spec, self.agent.host_ip, self.agent.base_env)
            finished, result = await bounded(self.agent.clock, run_handler(pre, r.spec, env, self.agent.host_ip,
                                                                           self.agent.clock),
                                             self._deadline() - self.agent.clock.now())
            if not finished:
                self.agent.event(self.pod, "FailedPreStopHook", f"PreStop hook for container {r.name} did not "
                                                                "complete within the grace period", "Warning")
            elif result is not None and not result[0]:
                self.agent.event(self.pod, "FailedPreStopHook", f"PreStop hook for container {r.name} failed: "
                                                                f"{result[1]}", "Warning")
        if not p.alive:
            return
        self.agent.event(self.pod, "Killing", f"Stopping container {r.name}")
        stop = (r.spec.get("lifecycle") or {}).get("stopSignal") or "SIGTERM"
        self.agent.runtime.signal(p, getattr(signal, stop, signal.SIGTERM))
        signalled = self.agent.clock.now()
        while p.alive:
            kill_at = max(signalled + MIN_STOP_WINDOW, self._deadline())
            finished, _ = await bounded(self.agent.clock, self._exit_or_update(p), kill_at - self.agent.clock.now())
            if not finished:
                self.agent.event(self.pod, "ExceededGracePeriod", f"Container {r.name} did not stop within the "
                                                                  "grace period and was killed", "Warning")
                self.agent.runtime.kill(p)
                await p.exited()

    async def _exit_or_update(self, p: Handle) -> None:
        """Returns when the process exits, or when the pod object changes (the grace may have shortened)."""
        self.wake.clear()
        exited = asyncio.ensure_future(p.exited())
        changed = asyncio.ensure_future(self.wake.wait())
        await asyncio.wait({exited, changed}, return_when=asyncio.FIRST_COMPLETED)
        exited.cancel()
        changed.cancel()

    async def _terminate(self) -> None:
        await self._stop_all()
        if not self.gone:
            await self._finish()

    async def _stop_all(self) -> None:
        """Stop what still runs: app containers, then sidecars in reverse order (L13), then any init container."""
        if not any(r.running for r in self.records):
            return
        self._terminating_since = self.agent.clock.now()
        self._stop_deadline = self._terminating_since + (MIN_STOP_WINDOW if self.gone else self.grace_period())
        apps = [r for r in self.records if r.kind == "app"]
        sidecars = [r for r in self.records if r.kind == "sidecar"]
        await asyncio.gather(*(self._stop_container(r) for r in apps))
        for r in reversed(sidecars):
            await self._stop_container(r)
        await asyncio.gather(*(self._stop_container(r) for r in self.records if r.kind == "init"))
        for _ in range(100):  # the exit watchers record each exit; wait until every one has
            if all(not r.running for r in self.records):
                break
            await self.agent.clock.sleep(0.01)

    async def _finish(self) -> None:
        """Stop the sidecars of a finished pod, write the terminal phase, then (for a deleted pod)
        remove the object with grace 0 (L14)."""
        await self._stop_all()
        await self._publish(False, final=True)
        if self.pod["metadata"].get("deletionTimestamp"):
            await self.agent.delete_pod(self.pod)

    async def _refuse(self, reason: str, message: str) -> None:
        self.agent.event(self.pod, reason, message, "Warning")
        await self.agent.write_status(self.pod, {"phase": "Failed", "reason": reason, "message": message})
        if self.pod["metadata"].get("deletionTimestamp"):
            await self.agent.delete_pod(self.pod)

    # --- status (through the agent's status writer) ----------------------------------------------

    def _views(self) -> list[ContainerView]:
        policy = self.pod["spec"].get("restartPolicy", "Always")
        views = []
        for r in self.records:
            if r.kind != "app":
                continue
            v = ContainerView(running=r.running)
            if not r.running and r.exit is not None:
                restarting = should_restart(policy, r.spec, r.exit.code) and not self.pod["metadata"].get(
                    "deletionTimestamp")
                if restarting:
                    v.waiting_after_exit, v.will_restart = True, True
                else:
                    v.terminated_code = r.exit.code
            views.append(v)
        return views

    def _phase(self) -> str:
        if self.failure is not None:
            return "Failed"
        initializing = not self.initialized
        if self.pod["metadata"].get("deletionTimestamp") and all(not r.running for r in self.records):
            apps = [r for r in self.records if r.kind == "app"]
            if any(r.ever_started for r in apps) or self.init_failed:
                ok = all(r.exit is not None and r.exit.code == 0 for r in apps)
                return "Succeeded" if ok else "Failed"
        return phase(self.init_failed, initializing and not self.init_failed, self._views())

    def _container_status(self, r: Record) -> Obj:
        image = r.spec.get("image", "")
        st: Obj = {"name": r.name, "image": image, "imageID": image, "restartCount": r.restarts,
                   "ready": r.ready, "started": r.started}
        if r.running and r.process is not None:
            st["state"] = {"running": {"startedAt": rfc3339(r.started_at)}}
            st["containerID"] = f"kubelite://{r.process.pid}"
        elif r.exit is not None and not r.waiting:
            st["state"] = {"terminated": self._terminated_state(r)}
        else:
            waiting: Obj = {"reason": r.waiting or "ContainerCreating"}
            if r.waiting_message:
                waiting["message"] = r.waiting_message
            st["state"] = {"waiting": waiting}
        if r.last_terminated is not None and (r.running or r.waiting):
            st["lastState"] = {"terminated": r.last_terminated}
        else:
            st["lastState"] = {}
        return st

    def _condition(self, kind: str, ok: bool, now: str, reason: str = "") -> Obj:
        status = "True" if ok else "False"
        previous = self._transitions.get(kind)
        if previous is None or previous[0] != status:
            self._transitions[kind] = (status, now)
        cond: Obj = {"type": kind, "status": status, "lastProbeTime": None,
                     "lastTransitionTime": self._transitions[kind][1]}
        if reason and not ok:
            cond["reason"] = reason
        return cond

    async def _publish(self, initializing: bool, final: bool = False) -> None:
        now = rfc3339(self.agent.clock.now())
        apps = [r for r in self.records if r.kind == "app"]
        inits = [r for r in self.records if r.kind != "app"]
        containers_ready = all(r.ready for r in apps) and not final
        gates = [g.get("conditionType") for g in self.pod["spec"].get("readinessGates") or []]
        existing = {c.get("type"): c.get("status") for c in (self.pod.get("status") or {}).get("conditions") or []}
        gates_ok = all(existing.get(g) == "True" for g in gates)
        initialized = not initializing and not self.init_failed
        status: Obj = {
            "phase": self._phase(),
            "hostIP": self.agent.host_ip, "hostIPs": [{"ip": self.agent.host_ip}],
            "podIP": self.agent.host_ip, "podIPs": [{"ip": self.agent.host_ip}],
            "startTime": rfc3339(self.started_at),
            "conditions": [
                self._condition("PodReadyToStartContainers", not final, now),
                self._condition("Initialized", initialized or final, now, "ContainersNotInitialized"),
                self._condition("ContainersReady", containers_ready, now, "ContainersNotReady"),
                self._condition("Ready", containers_ready and gates_ok, now,
                                "ReadinessGatesNotReady" if containers_ready else "ContainersNotReady"),
            ],
            "containerStatuses": [self._container_status(r) for r in apps],
        }
        if inits:
            status["initContainerStatuses"] = [self._container_status(r) for r in inits]
        if self.failure is not None:
            status["reason"], status["message"] = self.failure
        if status == self._written:
            return
        self._written = status
        await self.agent.write_status(self.pod, status)

