"""The work of one pod, behind pod_workers' PodSyncer contract (kubelet's SyncPod / SyncTerminatingPod /
SyncTerminatedPod), against the narrow NodeServices instead of the whole Agent.

`sync_pod` is level-triggered: each call compares what the pod asks for with what runs, starts
or restarts containers (init containers one at a time, sidecars kept running, then app
containers; ephemeral containers once each, never again), checkpoints the records and hands the
status to the status manager. It reports back whether the pod is finished (terminal) or must be
stopped (activeDeadlineSeconds) and when to be called again (a back-off or a deadline).
`sync_terminating_pod` stops app and ephemeral containers, then sidecars in reverse order, then
any init container, within the termination's deadline; `sync_terminated_pod` writes the terminal
status and, for a deleted pod, asks for the object's removal once that status is acknowledged.
Each may be called again after an error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubelite.agent import checkpoint
from kubelite.agent.lifecycle import Backoff, should_restart
from kubelite.agent.pod_containers import PodContainers
from kubelite.agent.pod_status import PodFacts, StatusBuilder, pod_phase
from kubelite.agent.pod_workers import SyncResult
from kubelite.agent.records import Record, records_for
from kubelite.agent.services import NodeServices
from kubelite.agent.termination import Termination
from kubelite.agent.volumes.claims import ClaimVolumes
from kubelite.agent.volumes.projection import MountError
from kubelite.api.volumes import claim_names
from kubelite.clock import parse_rfc3339

log = logging.getLogger("kubelite.agent")

Obj = dict[str, Any]
DEADLINE_EXCEEDED = ("DeadlineExceeded", "Pod was active on the node longer than the specified deadline")
MOUNT_RETRY_INITIAL, MOUNT_RETRY_MAX = 1.0, 32.0  # a failed volume set-up is retried (and on any object change)
CONFIG_RETRY = 10.0  # a CreateContainerConfigError is retried (and on any change of the objects it names)
# checks of a pod's claim volumes while they are not usable here: soon (the attach usually follows the
# scheduling within milliseconds), then backing off to a few seconds for a volume held elsewhere
VOLUME_RETRY_FIRST, VOLUME_RETRY_MAX = 0.1, 4.0


class PodSync:
    def __init__(self, node: NodeServices, pod: Obj, wake: Callable[[], None], saved: Obj | None = None,
                 claims: ClaimVolumes | None = None) -> None:
        self.node = node
        self.claims = claims  # None: no API to ask (hollow nodes), claim volumes are left to the sandbox
        self._volume_retry = VOLUME_RETRY_FIRST
        self.pod = pod
        self.wake = wake  # a referenced ConfigMap or Secret changed: sync again (volumes, env)
        self.uid = pod["metadata"]["uid"]
        self.records = records_for(pod["spec"], Backoff(node.config.max_restart_period, node.config.initial_backoff))
        self._admit_ephemeral()
        self.facts = PodFacts(started_at=node.clock.now())
        self.status = StatusBuilder(node.host_ip)
        self.containers = PodContainers(node, pod, wake, self._save)
        self.gone = False  # the object was removed: its logs stop following
        self._checkpointed: Obj | None = None
        self._mount_retry = MOUNT_RETRY_INITIAL
        if saved is not None:
            self._adopt(saved)

    @property
    def logs_dir(self) -> Path:
        return self.containers.logs_dir

    def log_path(self, name: str, restarts: int) -> Path:
        return self.containers.log_path(name, restarts)

    def _set_pod(self, pod: Obj) -> None:
        self.pod = self.containers.pod = pod

    # --- SyncPod ------------------------------------------------------------------------------------

    async def sync_pod(self, pod: Obj) -> SyncResult:
        self._set_pod(pod)
        self._admit_ephemeral()
        now = self.node.clock.now()
        deadline = self._active_deadline()
        if deadline is not None and now >= deadline:  # kubelet's activeDeadlineHandler
            return SyncResult(stop=DEADLINE_EXCEEDED)
        self._record_ended()
        mounted, volumes_due = await self._set_up_volumes(now)
        if mounted:
            await self._start_what_should_run()
            await self._start_ephemeral()
        self._save()
        terminal = pod_phase(self.pod, self.records, self.facts) in ("Succeeded", "Failed")
        # A finished pod's sidecars are stopped first (sync_terminating_pod); its terminal phase is
        # reported only after that (sync_terminated_pod), so it never shows sidecars running when Succeeded.
        self._publish(hold_phase=terminal)
        pending = [r.not_before for r in self.records if r.not_before > now]
        if deadline is not None:
            pending.append(deadline)
        if volumes_due is not None:
            pending.append(volumes_due)
        if any(r.waiting == "CreateContainerConfigError" for r in self.records):
            pending.append(now + CONFIG_RETRY)
        return SyncResult(terminal=terminal, resync_at=min(pending) if pending else None)

    async def _claims_ready(self) -> None:
        """Before anything starts: every claim volume attached to this node and mounted (S5); MountError else."""
        if self.claims is None or not claim_names(self.pod) or all(r.running for r in self.records):
            return
        problem = await self.claims.prepare(self.pod, self.logs_dir / "volumes")
        if problem:
            raise MountError(f"Unable to attach or mount volumes: {problem}")

    async def _start_what_should_run(self) -> None:
        policy = self.pod["spec"].get("restartPolicy", "Always")
        initializing = False
        for r in self.records:
            if r.kind == "sidecar":  # the next init container waits until the sidecar has started (L7)
                if not r.running:
                    await self.containers.start(r, restart=r.ever_started)
                if not r.started and not self.facts.initialized:
                    initializing = True
                    break
                continue
            if r.kind == "init":
                if self.facts.initialized or (r.exit is not None and r.exit.code == 0 and not r.running):
                    continue
                initializing = True
                if r.running:
                    break
                if r.exit is not None:  # failed: restarted unless its (or the pod's) policy and rules say no
                    if not should_restart(policy, r.spec, r.exit.code):
                        self.facts.init_failed = True
                        break
                    await self.containers.start(r, restart=True)
                else:
                    await self.containers.start(r, restart=False)
                break
        self.facts.initialized = self.facts.initialized or (not initializing and not self.facts.init_failed)
        if self.facts.initialized:
            for r in self.records:
                if r.kind != "app" or r.running:
                    continue
                if r.exit is None:
                    await self.containers.start(r, restart=False)
                elif should_restart(policy, r.spec, r.exit.code):
                    await self.containers.start(r, restart=True)

    def _admit_ephemeral(self) -> None:
        """A record for each ephemeral container the pod has gained (pods/ephemeralcontainers only ever adds)."""
        known = {r.name for r in self.records}
        self.records += [Record(c, "ephemeral") for c in self.pod["spec"].get("ephemeralContainers") or []
                         if c.get("name") not in known]

    async def _start_ephemeral(self) -> None:
        """kuberuntime's EphemeralContainersToStart: each ephemeral container is started once and never again,
        whatever its exit (and even while init containers run, as upstream); it counts for neither the phase nor
        readiness. One that names a target waits as CreateContainerConfigError, retried, until the target runs
        (getTargetID's "unable to find target container"). Upstream then shares the target's process namespace;
        kubelite's containers are processes in the host's PID namespace, so every container, the debugger too,
        already sees the target's processes — the target adds nothing more here (README: exec, attach, …)."""
        running = {r.name for r in self.records if r.running and r.kind != "ephemeral"}
        for r in self.records:
            if r.kind != "ephemeral" or r.ever_started or r.exit is not None:
                continue
            target = r.spec.get("targetContainerName")
            if target and target not in running:
                self.containers.config_error(r, f"unable to find target container {target}")
                continue
            await self.containers.start(r, restart=False)

    async def _set_up_volumes(self, now: float) -> tuple[bool, float | None]:
        """kubelet's WaitForAttachAndMount before any container starts, and the rewrite of API-data volumes
        on every sync: (set up, when to sync again for a retry or a token refresh). Meanwhile containers not
        started wait as ContainerCreating with the reason, and a FailedMount event says why."""
        try:
            await self._claims_ready()
        except MountError as exc:  # soon again: the attach usually follows the scheduling within milliseconds
            self._mount_failed(str(exc))
            retry, self._volume_retry = self._volume_retry, min(self._volume_retry * 2, VOLUME_RETRY_MAX)
            return False, now + retry
        self._volume_retry = VOLUME_RETRY_FIRST
        try:
            refresh = await self.node.volumes.set_up(self.pod, self.logs_dir / "volumes")
        except MountError as exc:
            self._mount_failed(str(exc))
            retry_at, self._mount_retry = now + self._mount_retry, min(MOUNT_RETRY_MAX, self._mount_retry * 2)
            return False, retry_at
        self._mount_retry = MOUNT_RETRY_INITIAL
        for r in self.records:
            if r.waiting == "ContainerCreating":
                r.waiting_message = ""
        return True, refresh

    def _mount_failed(self, message: str) -> None:
        waiting = [r for r in self.records if r.waiting == "ContainerCreating"]
        if any(r.waiting_message != message for r in waiting):  # one event per new reason
            self.containers.event("FailedMount", message, "Warning")
        for r in waiting:
            r.waiting_message = message

    def _active_deadline(self) -> float | None:
        seconds = self.pod["spec"].get("activeDeadlineSeconds")
        return None if seconds is None else self.facts.started_at + float(seconds)

    # --- SyncTerminatingPod / SyncTerminatedPod --------------------------------------------------------

    async def sync_terminating_pod(self, pod: Obj, termination: Termination) -> None:
        """Stop what still runs: app and ephemeral containers, then sidecars in reverse order (L13), then any init
        container."""
        self._set_pod(pod)
        self.gone = termination.gone
        if termination.reason and not self.facts.failure:
            self.facts.failure = (termination.reason, termination.message)
            self.containers.event(termination.reason, termination.message, "Warning")
        apps = [r for r in self.records if r.kind in ("app", "ephemeral")]
        await asyncio.gather(*(self.containers.stop(r, termination) for r in apps))
        for r in reversed([r for r in self.records if r.kind == "sidecar"]):
            await self.containers.stop(r, termination)
        await asyncio.gather(*(self.containers.stop(r, termination) for r in self.records if r.kind == "init"))
        self._record_ended()

    def _record_ended(self) -> None:
        """Record every exit now rather than when its watcher task gets to run (one loop turn later): a
        sync in between would take an ended container for one never started (and start it again into
        the same log) or judge it by its previous exit (and restart it without its back-off)."""
        for r in self.records:
            if r.process is not None and r.process.result is not None:
                self.containers.record_exit(r, r.process.result)

    async def sync_terminated_pod(self, pod: Obj, termination: Termination) -> None:
        self._set_pod(pod)
        if termination.shutdown:
            self._save()  # the next agent learns from the checkpoint how the containers ended
            return
        if not termination.gone:
            self.facts.final = True
            self._publish()
            if self.pod["metadata"].get("deletionTimestamp"):
                self.node.status.delete_when_synced(self.pod)  # after the terminal status is acknowledged (L14)
        self.node.volumes.tear_down(self.uid)
        checkpoint.remove(self.logs_dir)  # every process has ended

    # --- status and checkpoint ---------------------------------------------------------------------------

    def _publish(self, hold_phase: bool = False) -> None:
        """Hand the status to the status manager; `hold_phase`: report the phase the API shows (Pending or
        Running) rather than a terminal one that is not final yet."""
        held = ""
        if hold_phase:
            shown = (self.pod.get("status") or {}).get("phase")
            held = shown if shown in ("Pending", "Running") else "Running"
        self.node.status.set_status(self.pod, self.status.build(self.pod, self.records, self.facts,
                                                                self.node.clock.now(), held))

    def release(self) -> None:
        """The agent forgets this pod (its object is gone, nothing of it runs): break the two reference cycles
        among its parts — the containers' checkpoint callback is this object's `_save`, and each record's prober
        holds an unhealthy callback that holds the record — so that reference counting frees them now. Left to
        the cyclic collector, they outlived the pod: a simulation's collector seldom runs and never walks its
        older generations (sim/runner.py, GC_THRESHOLDS), so every pod that had been alive at a young
        collection kept ≈ 16 KB to the run's end (BENCHMARKS.md, Memory at steady state). Nothing calls either
        callback again: the checkpoint's directory is being removed, the probes were stopped at the exits."""
        self.containers.save = _nothing_to_save
        for r in self.records:
            if r.prober is not None:
                r.prober.on_unhealthy = _no_verdict

    def _save(self) -> None:
        data = {"uid": self.uid, "namespace": self.pod["metadata"]["namespace"],
                "name": self.pod["metadata"]["name"], "initFailed": self.facts.init_failed,
                "initialized": self.facts.initialized,
                "containers": {r.name: r.checkpoint() for r in self.records}}
        if data != self._checkpointed:
            self._checkpointed = data
            checkpoint.save(self.logs_dir, data)

    def _adopt(self, saved: Obj) -> None:
        """Take over from a previous agent: its records, its live processes, the published conditions."""
        self.facts.init_failed, self.facts.initialized = bool(saved.get("initFailed")), bool(saved.get("initialized"))
        containers = saved.get("containers") or {}
        for r in self.records:
            entry = containers.get(r.name)
            if entry is None:
                continue
            r.restore(entry)
            process = checkpoint.recover(self.node.runtime, entry)
            if process is not None:
                self.containers.adopt(r, process, starting=bool(entry.get("starting")))
        status = self.pod.get("status") or {}
        if status.get("startTime"):
            self.facts.started_at = float(parse_rfc3339(status["startTime"]))
        self.status.resume(status)
        log.info("pod %s/%s: re-adopted %d live container(s)", self.pod["metadata"]["namespace"],
                 self.pod["metadata"]["name"], sum(1 for r in self.records if r.running))


def _nothing_to_save() -> None:
    """A released pod's checkpoint callback (PodSync.release)."""


def _no_verdict(kind: str, message: str, grace: float | None) -> None:
    """A released pod's probes' unhealthy callback (PodSync.release)."""
