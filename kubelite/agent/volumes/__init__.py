"""The agent's volumes beyond emptyDir and hostPath (which sandbox.py binds directly).

Volumes whose content comes from the API: configMap, secret, downwardAPI and projected.

`objects` keeps the referenced ConfigMaps and Secrets current (watch-based), `tokens` gets projected
service account tokens, `projection` turns sources into files, `atomic_writer` writes them the way
kubelet does, and `manager` ties them together for pod sync. persistentVolumeClaim volumes: `claims` (attached here
before anything starts, S5).
"""
