"""Node-pressure eviction (L21): kubelet's eviction manager, ported.

`thresholds` parses the KubeletConfiguration's eviction settings, `host_stats` measures the
node and its pods, `manager` runs the control loop against the narrow `PodKiller` and
`NodeReporter` Protocols the agent implements.
"""
