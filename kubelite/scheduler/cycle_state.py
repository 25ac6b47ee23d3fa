"""CycleState: one scheduling cycle's scratchpad (pkg/scheduler/framework/cycle_state.go).

A plugin writes what it computed in PreFilter or PreScore under its own typed key and reads it back
in Filter or Score. `clone()` gives preemption a copy to try "what if" on: values that implement
`clone()` (StateData) are copied, the rest are shared because no plugin mutates them.
"""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

T = TypeVar("T")


class StateData(Protocol):
    """A value a dry run may change: cloned with the state."""

    def clone(self) -> StateData: ...


class StateKey(Generic[T]):
    """A key that carries the type of its value, so `read` is typed without casts at the call site."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class CycleState(dict[StateKey[Any], Any]):
    """A dict underneath, so `get` stays at C speed in preemption's dry runs (annotate what it returns);
    `write` and `read` are the typed way in."""

    __slots__ = ()

    def write(self, key: StateKey[T], value: T) -> None:
        self[key] = value

    def read(self, key: StateKey[T]) -> T:
        """The value written under `key`; KeyError if the plugin's PreFilter/PreScore did not run."""
        return self[key]  # type: ignore[no-any-return]  # written under the same typed key

    def delete(self, key: StateKey[Any]) -> None:
        self.pop(key, None)

    def clone(self) -> CycleState:
        copy = CycleState()
        for k, v in self.items():
            copy[k] = v.clone() if hasattr(type(v), "clone") else v
        return copy
