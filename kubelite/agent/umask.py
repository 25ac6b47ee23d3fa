"""A container's umask, runc's: the process runtime's shim sets it; exec'd processes, exec probes and lifecycle
hooks get it too — never the agent's own 077 (which keeps the agent's files private). A module of its own at
the agent's bottom layer, so that hooks (below the runtimes) and the runtimes share one value."""

CONTAINER_UMASK = 0o022
