"""--authorization-mode: the authorizer chain kube-apiserver builds (pkg/kubeapiserver/authorizer).

system:masters is always allowed first (the privileged-groups authorizer), then each mode in the
order given; the first Allow or Deny wins, all NoOpinion is a 403.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kubelite.apiserver.auth.authorizer import AlwaysAllow, Authorizer, Decision, Union
from kubelite.apiserver.auth.node import NodeAuthorizer, NodeGraph
from kubelite.apiserver.auth.rbac import PrivilegedGroups, RBACAuthorizer, RuleResolver
from kubelite.apiserver.auth.requestinfo import RequestAttributes
from kubelite.apiserver.registry.base import Lookup

MODES = ("AlwaysAllow", "AlwaysDeny", "Node", "RBAC")


class AlwaysDeny:
    def authorize(self, attributes: RequestAttributes) -> tuple[Decision, str]:
        return Decision.NO_OPINION, "Everything is forbidden."


@dataclass(frozen=True)
class Authorization:
    authorizer: Authorizer
    rbac: RuleResolver | None  # the rule resolver, when RBAC is a mode (rules reviews, escalation checks)
    node_restriction: bool = False  # with the Node mode, NodeRestriction admission as kubeadm enables it


def parse_modes(text: str) -> tuple[str, ...]:
    """The comma-separated flag value; an unknown or repeated mode is a ValueError with upstream's wording."""
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    for mode in modes:
        if mode not in MODES:
            raise ValueError(f"authorization-mode {mode!r} is not a valid mode (supported: {', '.join(MODES)})")
    if len(set(modes)) != len(modes):
        raise ValueError(f"authorization-mode {text!r} has mode specified more than once")
    return modes


def build(modes: Sequence[str], lookup: Lookup) -> Authorization:
    resolver = RuleResolver(lookup) if "RBAC" in modes else None
    chain: list[Authorizer] = [PrivilegedGroups()]
    for mode in modes:
        if mode == "AlwaysAllow":
            chain.append(AlwaysAllow())
        elif mode == "AlwaysDeny":
            chain.append(AlwaysDeny())
        elif mode == "Node":
            chain.append(NodeAuthorizer(NodeGraph(lookup)))
        elif mode == "RBAC":
            assert resolver is not None
            chain.append(RBACAuthorizer(resolver))
    return Authorization(Union(chain), resolver, "Node" in modes)
