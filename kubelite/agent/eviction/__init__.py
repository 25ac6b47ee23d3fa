"""Node-pressure eviction (L21): kubelet's eviction manager, ported.

`thresholds` parses the KubeletConfiguration's eviction settings; `host_stats` measures the
node and its pods behind the `stats.StatsProvider` Protocol; `signals` and `ranking` are
kubelet's helpers (observations, thresholds met, grace and transition bookkeeping, victim
order); `manager` is the control loop, which sees the agent only through its `PodKiller`
and `NodeReporter` Protocols; `node_pressure` reports conditions, taints and events on the
Node; `wiring` builds it all from a few of the agent's own entry points.
"""
