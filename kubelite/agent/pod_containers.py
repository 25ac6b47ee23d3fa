"""Starting, watching, probing and stopping the containers of one pod (kubelet's kuberuntime_container).

Everything here acts on one container record through the node services: start an instance
(checkpointed before the spawn), watch for its exit, run its probes, and stop it with preStop,
the stop signal and SIGKILL at the deadline. Deciding *which* containers to start or stop is
pod_sync's job; none of this ever runs because of an API failure.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubelite.agent import container as cspec
from kubelite.agent.cgroups import Limits
from kubelite.agent.hooks import run_hook
from kubelite.agent.lifecycle import should_restart
from kubelite.agent.pod_status import terminated_state
from kubelite.agent.prober import Prober, ProbeState
from kubelite.agent.records import Record, format_pod, pod_dir
from kubelite.agent.runtime.interface import Exit, Handle
from kubelite.agent.sandbox import sandboxed
from kubelite.agent.services import NodeServices
from kubelite.agent.termination import MIN_STOP_WINDOW, Termination, pod_grace
from kubelite.api.podresources import CPU, MEMORY, resource_list
from kubelite.clock import bounded, format_duration

log = logging.getLogger("kubelite.agent")

Obj = dict[str, Any]
POST_START_HOOK_ERROR = "PostStartHookError"  # kuberuntime's ErrPostStartHook: the start's error, as a waiting reason


class PodContainers:
    def __init__(self, node: NodeServices, pod: Obj, wake: Callable[[], None], save: Callable[[], None]) -> None:
        self.node = node
        self.pod = pod  # the newest pod object (pod_sync keeps it current)
        self.wake = wake  # the pod worker's wake-up: a container exited or a probe result changed
        self.save = save  # checkpoint the records
        self.uid = pod["metadata"]["uid"]
        self.logs_dir = pod_dir(node.data_dir, pod)
        self._sandbox_error = ""  # the last FailedCreatePodSandBox reason (one event per reason, not per container)

    def log_path(self, name: str, restarts: int) -> Path:
        return self.logs_dir / name / f"{restarts}.log"

    def event(self, reason: str, message: str, kind: str = "Normal") -> None:
        """An event about the pod itself (FailedCreatePodSandBox, FailedMount, InvalidEnvironmentVariableNames)."""
        self.node.event(self.pod, reason, message, kind)

    def container_event(self, r: Record, reason: str, message: str, kind: str = "Normal") -> None:
        """recordContainerEvent: an event about one container, its involvedObject the pod with GenerateContainerRef's
        fieldPath (`spec.containers{NAME}`), so `kubectl describe` and field selectors tell containers apart."""
        self.node.event(self.pod, reason, message, kind, field_path(r))

    def command(self, r: Record) -> tuple[list[str], dict[str, str]]:
        """(argv, env) of the container's next instance: a fresh environment from the API objects as they are now,
        in the sandbox (ConfigError when the container cannot be run as specified)."""
        env = cspec.environment(self.pod, r.spec, self.node.host_ip, self.node.base_env,
                                self.node.volumes.allocatable, self.node.volumes.objects.get, self._warn,
                                self.node.config.cluster_domain)
        return self._sandboxed(r, cspec.argv(r.spec, env, self.node.config.image_catalog)), env

    def exec_command(self, r: Record, argv: list[str]) -> tuple[list[str], dict[str, str]]:
        """(argv, env) of `argv` run in the running container (exec): its sandbox, and the environment its instance
        was started with — CRI's Exec joins the container's process, so a ConfigMap changed or deleted since, or a
        Service created since, changes nothing until the container restarts (ConfigError: no sandbox can be built)."""
        assert r.process is not None, "exec needs a running container"
        return self._sandboxed(r, argv), dict(r.process.env)

    def _sandboxed(self, r: Record, argv: list[str]) -> list[str]:
        if not self.node.runtime.sandboxed:
            return argv
        return sandboxed(argv, self.pod, r.spec, self.logs_dir / "volumes",
                         (self.node.data_dir, *self.node.config.protected_paths))

    # --- start ------------------------------------------------------------------------------------

    async def start(self, r: Record, restart: bool) -> None:
        """Start the container's next instance, unless its back-off has not ended (then CrashLoopBackOff)."""
        now = self.node.clock.now()
        if restart and now < r.not_before:
            if r.backoff_reported != r.restarts:  # one BackOff event per back-off period, as kubelet
                r.backoff_reported = r.restarts
                self.container_event(r, "BackOff", f"Back-off restarting failed container {r.name} in pod "
                                                   f"{format_pod(self.pod)}", "Warning")
            r.waiting = "CrashLoopBackOff"
            wait = format_duration(round((r.not_before - r.finished_at) * 1e9))  # Go's Duration: "1m20s"
            r.waiting_message = f"back-off {wait} restarting failed container={r.name} pod={format_pod(self.pod)}"
            return
        try:
            argv, env = self.command(r)
        except cspec.SandboxError as exc:  # SyncPod's createPodSandbox failed: its event, once per reason
            if exc.args[0] != self._sandbox_error:
                self.event("FailedCreatePodSandBox", f"Failed to create pod sandbox: {exc}", "Warning")
            self._sandbox_error = exc.args[0]
            return
        except cspec.ConfigError as exc:
            self._image_present(r)  # startContainer: EnsureImageExists comes before generateContainerConfig
            self.config_error(r, str(exc))
            return
        self._image_present(r)
        if restart:
            r.restarts += 1
        log_path = self.log_path(r.name, r.restarts)
        r.starting = str(log_path)
        self.save()  # before the spawn: an agent killed right after it still finds the process (runtime.find)
        try:
            r.process = await self.node.runtime.start(argv, env, r.spec.get("workingDir"), log_path,
                                                      self._limits(r), stdin=bool(r.spec.get("stdin")),
                                                      tty=bool(r.spec.get("tty")))
        except OSError as exc:
            r.waiting, r.waiting_message = "RunContainerError", str(exc)
            r.exit, r.finished_at = Exit(128), now
            self.container_event(r, "Failed", f"Error: {exc}", "Warning")
            return
        finally:
            r.starting = None
        r.started_at, r.ever_started, r.waiting, r.waiting_message = self.node.clock.now(), True, "", ""
        self.save()
        self.container_event(r, "Created", f"Created container {r.name}")
        self.container_event(r, "Started", f"Started container {r.name}")
        self.node.spawn(self._watch(r, r.process))
        post = (r.spec.get("lifecycle") or {}).get("postStart")
        if post:
            failure = await run_hook(post, r.spec, env, self.node.host_ip, self.node.clock, format_pod(self.pod))
            if failure:
                await self._post_start_failed(r, r.process, failure)
                return
        self.probe(r)

    def _image_present(self, r: Record) -> None:
        """EnsureImageExists with the image present: Normal `Pulled` "Container image … already present on machine",
        before every start (restarts too; the event correlator counts the repeats).

        kubelite never pulls: an image is only a name that the catalog (or the container's command) turns into a
        host command, so it is present on the node whatever the policy, and this is the only true Pulled text.
        Partial, deliberately: with imagePullPolicy Always kubelet would pull and say "Pulling image" and
        "Successfully pulled image … in …"; kubelite cannot honestly claim a pull, so it says "already present"
        for Always too. Neither ErrImageNeverPull nor ErrImagePull can happen here (an image with no known
        entrypoint is CreateContainerConfigError, see container.argv)."""
        self.container_event(r, "Pulled", f'Container image "{r.spec.get("image", "")}" already present on machine')

    async def _post_start_failed(self, r: Record, p: Handle, failure: str) -> None:
        """kuberuntime's startContainer after a failed postStart: the event (a fixed text — "do not record the
        message in the event so that secrets won't leak from the server"; the hook's message goes to the agent's
        log), then killContainer with the message "FailedPostStartHook" (the Killing event's text; preStop and the
        pod's grace period as for any stop), all before the start returns, so no status shows the container
        running meanwhile. Once it has stopped it waits as PostStartHookError with the hook's message (kubelet's
        reason cache, until the next start or back-off) when it is to be restarted; else it stays Terminated."""
        log.warning("pod %s: PostStart hook for container %s failed: %s", format_pod(self.pod), r.name, failure)
        self.container_event(r, "FailedPostStartHook", "PostStartHook failed", "Warning")
        now = self.node.clock.now()
        await self.stop(r, Termination(now, now + pod_grace(self.pod)), "FailedPostStartHook")
        if r.process is not p or p.result is None:
            return
        self.record_exit(r, p.result)
        if should_restart(self.pod["spec"].get("restartPolicy", "Always"), r.spec, p.result.code):
            r.waiting, r.waiting_message = POST_START_HOOK_ERROR, failure

    def config_error(self, r: Record, message: str) -> None:
        """The container cannot be created as specified: Waiting in CreateContainerConfigError (one event per spell)."""
        if r.waiting != "CreateContainerConfigError":
            self.container_event(r, "Failed", f"Error: {message}", "Warning")
        r.waiting, r.waiting_message = "CreateContainerConfigError", message

    def _warn(self, reason: str, message: str) -> None:
        self.event(reason, message, "Warning")

    def adopt(self, r: Record, process: Handle, starting: bool) -> None:
        """A previous agent's instance: watch it (and resume its probes) or record how it ended."""
        r.process = process
        if starting:  # the previous agent died while spawning this instance
            r.started_at, r.ever_started, r.waiting = process.started, True, ""
        if process.alive:
            published = self._published_status(r.name)
            self.probe(r, resumed=ProbeState(bool(published.get("started")), bool(published.get("ready"))))
            self.node.spawn(self._watch(r, process))
        else:
            assert process.result is not None
            self.record_exit(r, process.result)

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

    # --- probes and exits -------------------------------------------------------------------------

    def probe(self, r: Record, resumed: ProbeState | None = None) -> None:
        """Start the probes of the container's running instance (exec probes run in its environment)."""
        assert r.process is not None, "probes need a running container"
        answer = getattr(self.node.runtime, "answer_probe", None)  # the hollow runtime's (prober.ProbeAnswer)
        r.prober = Prober(self.node.clock, r.spec, r.process.env, self.node.host_ip, r.started_at, self.wake,
                          functools.partial(self._unhealthy, r), resumed,
                          functools.partial(answer, r.process) if answer else None)

    def _unhealthy(self, r: Record, kind: str, message: str, grace: float | None) -> None:
        """A failed probe: an event; on a liveness/startup verdict, kill the container (restart policy applies)."""
        self.container_event(r, "Unhealthy", f"{kind} probe failed: {message}".strip(), "Warning")
        if grace is None or r.process is None or not r.running:
            return
        period = grace if grace >= 0 else pod_grace(self.pod)
        self.container_event(r, "Killing", f"Container {r.name} failed {kind.lower()} probe, will be restarted")
        self.node.spawn(self._kill_after_probe(r.process, r.spec, period))

    async def _kill_after_probe(self, p: Handle, spec: Obj, grace: float) -> None:
        self.node.runtime.signal(p, stop_signal(spec))
        finished, _ = await bounded(self.node.clock, p.exited(), max(1.0, grace))
        if not finished:
            self.node.runtime.kill(p)

    async def _watch(self, r: Record, p: Handle) -> None:
        result = await self.node.runtime.wait(p)
        if r.process is p:
            self.record_exit(r, result)

    def record_exit(self, r: Record, result: Exit) -> None:
        if r.exit is result:
            return  # already recorded (by pod sync after a stop, before the watcher ran)
        if r.prober is not None:
            r.prober.stop()
        now = self.node.clock.now()
        r.exit, r.finished_at = result, result.finished_at if result.finished_at is not None else now
        r.last_terminated = terminated_state(r)
        # the back-off counts from the exit (kubelet's IsInBackOffSince(key, FinishedAt)), not from when the exit
        # was seen: the CrashLoopBackOff message's wait is then the period itself ("10s", not "10.12s")
        r.not_before = r.backoff.next_restart(r.finished_at, r.finished_at - r.started_at)
        # waiting in CrashLoopBackOff only when it will be restarted; otherwise it stays Terminated
        restarts = should_restart(self.pod["spec"].get("restartPolicy", "Always"), r.spec, result.code)
        r.waiting = "CrashLoopBackOff" if restarts and r.not_before > now else ""
        self.wake()

    # --- stop -------------------------------------------------------------------------------------

    async def stop(self, r: Record, termination: Termination, message: str = "") -> None:
        """preStop (time spent is deducted), then the stop signal, then SIGKILL when the window ends; `message` is
        the Killing event's text (killContainer's, "Stopping container <name>" when empty).

        Every container gets at least MIN_STOP_WINDOW after its stop signal: this is also the
        one-time 2 s extension when the preStop hook overran the grace period.
        """
        if not r.running or r.process is None:
            return
        p, clock = r.process, self.node.clock
        pre = (r.spec.get("lifecycle") or {}).get("preStop")
        if pre and not termination.gone:
            finished, failure = await bounded(clock, run_hook(pre, r.spec, p.env, self.node.host_ip, clock,
                                                               format_pod(self.pod)),
                                              termination.deadline - clock.now())
            # executePreStopHook: a failure's event has a fixed text (the hook's output could hold secrets), and a
            # hook that outlives the grace period is only logged
            if not finished:
                log.info("pod %s: PreStop hook for container %s not completed in grace period", format_pod(self.pod),
                         r.name)
            elif failure:
                log.warning("pod %s: PreStop hook for container %s failed: %s", format_pod(self.pod), r.name,
                            failure)
                self.container_event(r, "FailedPreStopHook", "PreStopHook failed", "Warning")
        if not p.alive:
            return
        self.container_event(r, "Killing", message or f"Stopping container {r.name}")
        self.node.runtime.signal(p, stop_signal(r.spec))
        signalled = clock.now()
        while p.alive:
            kill_at = max(signalled + MIN_STOP_WINDOW, termination.deadline)
            exited, changed = asyncio.ensure_future(p.exited()), termination.changed()
            finished, _ = await bounded(clock, asyncio.wait({exited, changed}, return_when=asyncio.FIRST_COMPLETED),
                                        kill_at - clock.now())
            exited.cancel()
            changed.cancel()
            if not finished:  # killContainer: SIGKILL, no event (ExceededGracePeriod is only killPodNow's, eviction)
                self.node.runtime.kill(p)
                await p.exited()


SPEC_FIELDS = {"app": "containers", "init": "initContainers", "sidecar": "initContainers",
               "ephemeral": "ephemeralContainers"}


def field_path(r: Record) -> str:
    """GenerateContainerRef's fieldPath: `spec.containers{NAME}`, `spec.initContainers{NAME}` (sidecars are init
    containers) or `spec.ephemeralContainers{NAME}` (names are unique across all three lists, so the record's kind
    finds the same list as upstream's search by name)."""
    return f"spec.{SPEC_FIELDS[r.kind]}{{{r.name}}}"


def stop_signal(spec: Obj) -> int:
    stop = (spec.get("lifecycle") or {}).get("stopSignal") or "SIGTERM"
    return int(getattr(signal, stop, signal.SIGTERM))
