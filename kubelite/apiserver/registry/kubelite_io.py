"""kubelite.io/v1alpha1: kubelite's own kinds.

SchedulingExplanation records, per pod, the scheduler's last verdict: each filter
plugin's rejections (nodes grouped by reason), the best nodes' scores per plugin, and
suggestions for a pending pod (G6). The scheduler writes it; `kubectl get --raw` and
`kubelite explain` read it.
"""

from __future__ import annotations

from kubelite.apiserver.registry.base import Resource, Strategy


class ExplanationStrategy(Strategy):
    pass


SCHEDULING_EXPLANATIONS = Resource("kubelite.io", "v1alpha1", "schedulingexplanations", "schedulingexplanation",
                                   "SchedulingExplanation", True, "", short_names=("sx",))
