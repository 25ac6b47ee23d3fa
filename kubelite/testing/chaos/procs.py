"""The host's process table as the invariant checkers need it: the workload's containers are real
processes, marked by their environment (CHAOS_RUN, and the pod's name, uid and node from the downward API)."""

from __future__ import annotations

from pathlib import Path

from kubelite.testing.chaos.observations import ProcSample

RUN_ENV = "CHAOS_RUN"
WORKLOAD_COMM = "bash"  # the workload's loop; its `sleep` children carry the same markers and are not counted


def _environ(pid_dir: Path) -> dict[str, str]:
    raw = (pid_dir / "environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if "=" in item)


def scan(run_id: str, t: float, proc: Path = Path("/proc")) -> list[ProcSample]:
    """Every live (not zombie) workload process of run `run_id` at time `t`."""
    out = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() != WORKLOAD_COMM:
                continue
            stat = (entry / "stat").read_text()
            if stat[stat.rindex(")") + 2] in "ZX":
                continue
            env = _environ(entry)
        except (OSError, ValueError):
            continue  # gone meanwhile, or not ours to read
        if env.get(RUN_ENV) != run_id:
            continue
        out.append(ProcSample(t, int(entry.name), env.get("CHAOS_IDENTITY", ""), env.get("CHAOS_POD_UID", ""),
                              env.get("CHAOS_NODE", ""), env.get("CHAOS_KIND") == "statefulset"))
    return out
