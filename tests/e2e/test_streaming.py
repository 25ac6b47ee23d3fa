"""exec, attach, port-forward and cp with the real kubectl against `kubelite up`, and the agent's authentication.

kubectl v1.32 speaks WebSocket (v5.channel.k8s.io) for exec and attach and SPDY tunnelled in
WebSocket for port-forward; the API server splices the connection to the agent. Interactive
sessions (`exec -it`, `run -it`) run kubectl in a real terminal under tmux.
"""

from __future__ import annotations

import datetime as dt
import os
import shlex
import shutil
import signal
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.conftest import ServerProcess, free_port
from tests.e2e.pods import agent_pid, apply_pod, get_pod, pod_phase, sh, wait_for

pytestmark = pytest.mark.timeout(180)

# kubectl's transports: WebSocket (its default) and SPDY/3.1, its fallback when the WebSocket upgrade fails
TRANSPORTS = {"websocket": {}, "spdy": {"KUBECTL_REMOTE_COMMAND_WEBSOCKETS": "false",
                                        "KUBECTL_PORT_FORWARD_WEBSOCKETS": "false"}}


@pytest.fixture(params=sorted(TRANSPORTS))
def transport(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """kubectl (run with this process's environment) speaks the parameter's transport."""
    chosen: dict[str, str] = TRANSPORTS[request.param]
    for name, value in chosen.items():
        monkeypatch.setenv(name, value)
    return chosen


@pytest.fixture(scope="module")
def pod(up: ServerProcess) -> str:
    """A running pod with env, a working dir and an emptyDir, to exec into."""
    apply_pod(up, "box", [sh("main", "echo started; sleep 3600", env=[{"name": "GREETING", "value": "hello"}],
                             workingDir="/tmp", volumeMounts=[{"name": "scratch", "mountPath": "/scratch"}])],
              volumes=[{"name": "scratch", "emptyDir": {}}], terminationGracePeriodSeconds=1)
    assert wait_for(lambda: pod_phase(up, "box") == "Running"), get_pod(up, "box")
    return "box"


def _agent(up: ServerProcess) -> str:
    node = up.kubectl("get", "nodes", "-o", "jsonpath={.items[0].status.daemonEndpoints.kubeletEndpoint.Port}")
    return f"https://127.0.0.1:{node.stdout.strip()}"


def _foreign_certificate(directory: Path) -> tuple[Path, Path]:
    """A client certificate the cluster CA did not sign (self-signed)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver-kubelet-client")])
    now = dt.datetime.now(dt.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(minutes=1))
            .not_valid_after(now + dt.timedelta(days=1)).sign(key, hashes.SHA256()))
    crt, pem = directory / "foreign.crt", directory / "foreign.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    return crt, pem


def _agent_get(url: str, cert: tuple[Path, Path] | None) -> int | str:
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    if cert is not None:
        ctx.load_cert_chain(*cert)
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as err:
        return err.code
    except (urllib.error.URLError, ssl.SSLError, ConnectionError):
        return "TLS handshake refused"


# --- the agent's endpoint authenticates its callers (issue 10, item 5) ---------------------------------

AUTH_CASES = [
    # (name, path, client certificate: none | apiserver | foreign, expected)
    ("healthz_is_open", "/healthz", "none", 200),
    ("logs_refuse_anonymous", "/containerLogs/default/box/main", "none", 401),
    ("exec_refuses_anonymous", "/exec/default/box/main?command=id&stdout=1", "none", 401),
    ("portforward_refuses_anonymous", "/portForward/default/box", "none", 401),
    ("attach_refuses_anonymous", "/attach/default/box/main?stdout=1", "none", 401),
    ("certificate_of_another_ca_is_refused", "/containerLogs/default/box/main", "foreign", "TLS handshake refused"),
    ("logs_serve_the_api_server", "/containerLogs/default/box/main", "apiserver", 200),
]


@pytest.mark.parametrize(("path", "cert", "expected"), [c[1:] for c in AUTH_CASES], ids=[c[0] for c in AUTH_CASES])
def test_agent_endpoint_authentication(up: ServerProcess, pod: str, tmp_path: Path, path: str, cert: str,
                                       expected: int | str) -> None:
    pki = up.data_dir / "pki"
    certs = {"none": None, "foreign": _foreign_certificate(tmp_path),
             "apiserver": (pki / "apiserver-kubelet-client.crt", pki / "apiserver-kubelet-client.key")}
    assert _agent_get(_agent(up) + path, certs[cert]) == expected


def test_kubectl_logs_still_work_through_the_client_certificate(up: ServerProcess, pod: str) -> None:
    assert "started" in up.kubectl("logs", pod).stdout


# --- exec ----------------------------------------------------------------------------------------------

EXIT_CASES = [
    ("success", "true", 0),
    ("exit_code_carried_back", "exit 3", 3),
    ("killed_by_a_signal", "kill -TERM $$", 143),
]


@pytest.mark.parametrize(("script", "code"), [c[1:] for c in EXIT_CASES], ids=[c[0] for c in EXIT_CASES])
def test_exec_exit_code(up: ServerProcess, pod: str, transport: dict[str, str], script: str, code: int) -> None:
    res = up.kubectl("exec", pod, "--", "sh", "-c", script, check=False)
    assert res.returncode == code, res.stderr


OUTPUT_CASES = [
    # (name, command, stdin, expected stdout)
    ("env_of_the_container", ["sh", "-c", "echo $GREETING"], None, "hello\n"),
    ("working_dir_of_the_container", ["pwd"], None, "/tmp\n"),
    ("stdin_piped", ["sh", "-c", "tr a-z A-Z; echo end"], "piped text\n", "PIPED TEXT\nend\n"),
    ("stderr_kept_apart", ["sh", "-c", "echo out; echo err >&2"], None, "out\n"),
    ("large_output", ["sh", "-c", "head -c 300000 /dev/zero | tr '\\0' x; echo"], None, "x" * 300000 + "\n"),
]


@pytest.mark.parametrize(("command", "stdin", "expected"), [c[1:] for c in OUTPUT_CASES],
                         ids=[c[0] for c in OUTPUT_CASES])
def test_exec_streams(up: ServerProcess, pod: str, transport: dict[str, str], command: list[str],
                      stdin: str | None, expected: str) -> None:
    args = ["exec", *(["-i"] if stdin is not None else []), pod, "--", *command]
    res = up.kubectl(*args, stdin=stdin)
    assert res.stdout == expected


def test_exec_runs_in_the_containers_sandbox(up: ServerProcess, pod: str) -> None:
    """The exec'd command sees the pod's volumes and, like the container, none of the node's secrets."""
    up.kubectl("exec", pod, "--", "sh", "-c", "echo shared > /scratch/f")
    assert up.kubectl("exec", pod, "--", "cat", "/scratch/f").stdout == "shared\n"
    res = up.kubectl("exec", pod, "--", "cat", str(up.data_dir / "admin.token"), check=False)
    assert res.returncode != 0 and "No such file or directory" in res.stderr


ERROR_CASES = [
    ("unknown_container", ["exec", "box", "-c", "nope", "--", "true"], "container nope is not valid for pod box"),
    ("unknown_pod", ["exec", "ghost", "--", "true"], 'pods "ghost" not found'),
]


@pytest.mark.parametrize(("args", "message"), [c[1:] for c in ERROR_CASES], ids=[c[0] for c in ERROR_CASES])
def test_exec_errors(up: ServerProcess, pod: str, args: list[str], message: str) -> None:
    res = up.kubectl(*args, check=False)
    assert res.returncode != 0 and message in res.stderr


# --- cp (tar through exec) -----------------------------------------------------------------------------

def test_cp_both_ways(up: ServerProcess, pod: str, transport: dict[str, str], tmp_path: Path) -> None:
    src = tmp_path / "up.bin"
    src.write_bytes(os.urandom(200_000))
    up.kubectl("cp", str(src), f"{pod}:/scratch/up.bin")
    assert up.kubectl("exec", pod, "--", "sh", "-c", "wc -c < /scratch/up.bin").stdout.strip() == "200000"
    back = tmp_path / "down.bin"
    up.kubectl("cp", f"{pod}:/scratch/up.bin", str(back))
    assert back.read_bytes() == src.read_bytes()


# --- port-forward --------------------------------------------------------------------------------------

@contextmanager
def _port_forward(up: ServerProcess, target: str, ports: str) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "KUBECONFIG": str(up.kubeconfig), "HOME": str(up.home)}
    proc = subprocess.Popen(["kubectl", "port-forward", target, ports], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        assert "Forwarding from" in proc.stdout.readline()
        yield proc
    finally:
        proc.terminate()
        proc.wait(10)


def test_port_forward_serves_http(up: ServerProcess, transport: dict[str, str]) -> None:
    pod_port, local = free_port(), free_port()
    up.kubectl("delete", "pod", "web", "--ignore-not-found", "--grace-period=0", "--force")
    apply_pod(up, "web", [{"name": "web", "image": "busybox",
                           "command": ["python3", "-u", "-m", "http.server", str(pod_port), "--bind", "127.0.0.1"]}],
              terminationGracePeriodSeconds=1)
    assert wait_for(lambda: pod_phase(up, "web") == "Running")
    assert wait_for(lambda: "Serving HTTP" in up.kubectl("logs", "web").stdout)
    with _port_forward(up, "pod/web", f"{local}:{pod_port}"):
        for _ in range(2):  # a second connection through the same tunnel
            with urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=10) as resp:
                assert resp.status == 200 and b"Directory listing" in resp.read()


def test_port_forward_to_a_closed_port_reports_the_error(up: ServerProcess, pod: str) -> None:
    local, closed = free_port(), free_port()
    with _port_forward(up, f"pod/{pod}", f"{local}:{closed}") as proc, pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{local}/", timeout=10)
    assert proc.stdout is not None
    out = proc.stdout.read()
    assert "error forwarding port" in out
    assert f"dial tcp4 127.0.0.1:{closed}: connect: connection refused" in out  # containerd's dial error


# --- attach --------------------------------------------------------------------------------------------

def test_attach_with_stdin_once(up: ServerProcess, transport: dict[str, str]) -> None:
    up.kubectl("delete", "pod", "reader", "--ignore-not-found", "--grace-period=0", "--force")
    apply_pod(up, "reader", [sh("main", "while read l; do echo got:$l; done; echo bye", stdin=True, stdinOnce=True)],
              terminationGracePeriodSeconds=1, restartPolicy="Never")
    assert wait_for(lambda: pod_phase(up, "reader") == "Running")
    res = up.kubectl("attach", "-i", "reader", stdin="one\ntwo\n")
    assert "got:one\ngot:two\n" in res.stdout
    assert wait_for(lambda: pod_phase(up, "reader") == "Succeeded")  # stdin closed after the session
    assert up.kubectl("logs", "reader").stdout == "got:one\ngot:two\nbye\n"


# --- terminals, under tmux -----------------------------------------------------------------------------

class Terminal:
    """kubectl in a real terminal: a detached tmux session of a fixed size."""

    def __init__(self, up: ServerProcess, name: str, command: str, extra_env: dict[str, str]) -> None:
        self.name = name
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in
                       {"KUBECONFIG": str(up.kubeconfig), "HOME": str(up.home), **extra_env}.items())
        subprocess.run(["tmux", "new-session", "-d", "-s", name, "-x", "100", "-y", "30",
                        f"env {env} {command}; echo rc=$?; sleep 60"], check=True)

    def screen(self) -> str:
        return subprocess.run(["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True,
                              text=True).stdout

    def type(self, keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, keys, "Enter"], check=True)

    def resize(self, width: int, height: int) -> None:
        subprocess.run(["tmux", "resize-window", "-t", self.name, "-x", str(width), "-y", str(height)], check=True)

    def shows(self, text: str, timeout: float = 20) -> bool:
        return wait_for(lambda: text in self.screen(), timeout)

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


@pytest.fixture
def terminal(up: ServerProcess) -> Iterator[list[Terminal]]:
    if shutil.which("tmux") is None:
        pytest.fail("tmux is needed for the terminal tests (apt-get install tmux; .ci/run installs it)")
    opened: list[Terminal] = []
    yield opened
    for t in opened:
        t.close()


def test_exec_tty_with_resize(up: ServerProcess, pod: str, transport: dict[str, str],
                              terminal: list[Terminal]) -> None:
    t = Terminal(up, f"exec-{os.getpid()}", f"kubectl exec -it {pod} -- sh", transport)
    terminal.append(t)
    assert t.shows("#")
    t.type("tty; stty size")
    assert t.shows("/dev/pts/") and t.shows("30 100"), t.screen()
    t.resize(80, 24)
    time.sleep(0.5)  # tmux delivers the new size to kubectl, which sends it on the resize channel
    t.type("stty size; exit 7")
    assert t.shows("24 80") and t.shows("rc=7"), t.screen()


def test_run_interactive_and_removed(up: ServerProcess, transport: dict[str, str], terminal: list[Terminal]) -> None:
    t = Terminal(up, f"run-{os.getpid()}", "kubectl run -it --rm shell --image=busybox --restart=Never -- sh",
                 transport)
    terminal.append(t)
    # the shell's first prompt may come before kubectl attaches (only later output is streamed): as kubectl
    # suggests, press enter
    assert t.shows("If you don't see a command prompt, try pressing enter.", timeout=30), t.screen()
    t.type("")
    assert t.shows("#"), t.screen()
    t.type("echo $((6*7))")
    assert t.shows("42"), t.screen()
    t.type("exit 4")
    assert t.shows("rc=4", timeout=30), t.screen()
    assert 'pod "shell" deleted' in t.screen()
    assert wait_for(lambda: get_pod(up, "shell") == {})


def test_exec_after_the_agent_was_killed(up: ServerProcess, pod: str) -> None:
    """(Last in the module: it restarts the agent.) A restarted agent (new port, re-adopted container)
    serves exec again as soon as its node says where."""
    os.kill(agent_pid(up.proc.pid), signal.SIGKILL)
    assert wait_for(lambda: up.kubectl("exec", pod, "--", "true", check=False).returncode == 0, 60)
    assert up.kubectl("exec", pod, "--", "sh", "-c", "echo $GREETING").stdout == "hello\n"
    assert up.kubectl("get", "pod", pod, "-o", "jsonpath={.status.containerStatuses[0].restartCount}").stdout == "0"
