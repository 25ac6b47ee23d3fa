"""Admission plugins that act on several kinds: LimitRanger (limitranger.py) and ResourceQuota (resourcequota.py).

Plugins of one kind stay beside its strategy (priority in registry/pods.py, ServiceAccount in auth/admission.py).
"""
