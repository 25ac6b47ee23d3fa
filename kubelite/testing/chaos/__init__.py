"""Fault injection with checked invariants (S8): a controllable TCP proxy on every agent↔API-server link,
a harness that runs a real control plane and three agents on this machine, a seeded schedule of faults,
and a table of invariant checkers over what the host's process table, the workload's files and the API
showed during the run. `python -m kubelite.testing.chaos` (`make chaos`) runs it; see the README."""
