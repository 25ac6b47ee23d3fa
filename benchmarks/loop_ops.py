"""What the simulator's event loop costs per operation (`VirtualTimeLoop`), CPU µs, the best of 5 runs:

    python benchmarks/loop_ops.py

- a timer fired while N others are pending (each fired timer re-armed at a random delay up to 60 s: the heap
  keeps its size, as a simulation's thousands of heartbeats and resyncs do), for N = 2,000 and 20,000;
- a turn of the loop that runs two ready callbacks (one re-queues itself and a no-op).

For an A/B, run it with PYTHONPATH set to the other tree (BENCHMARKS.md, Virtual-time loop and controller passes).
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

# Appended, not inserted first: kubelite itself comes from PYTHONPATH when set (an A/B against another tree's code)
sys.path.append(str(Path(__file__).resolve().parent.parent))
from kubelite.sim.clock import VirtualTimeLoop

FIRES = 100_000
RUNS = 5


def timer_fired(pending: int) -> float:
    """CPU µs per timer fired with `pending` timers on the heap."""
    loop = VirtualTimeLoop()
    rng = random.Random(1)
    fired = 0

    def fire() -> None:
        nonlocal fired
        fired += 1
        if fired >= FIRES:
            loop.stop()
        else:
            loop.call_later(rng.random() * 60, fire)

    for _ in range(pending):
        loop.call_later(rng.random() * 60, fire)
    started = time.process_time()
    loop.run_forever()
    spent = time.process_time() - started
    loop.close()
    return spent / FIRES * 1e6


def turn_with_two_callbacks() -> float:
    """CPU µs per turn running a callback that queues itself and a no-op."""
    loop = VirtualTimeLoop()
    turns = 0

    def noop() -> None:
        pass

    def again() -> None:
        nonlocal turns
        turns += 1
        if turns >= FIRES:
            loop.stop()
        else:
            loop.call_soon(again)
            loop.call_soon(noop)

    loop.call_soon(again)
    started = time.process_time()
    loop.run_forever()
    spent = time.process_time() - started
    loop.close()
    return spent / FIRES * 1e6


def main() -> None:
    for pending in (2_000, 20_000):
        print(f"a timer fired, {pending:,} pending   {min(timer_fired(pending) for _ in range(RUNS)):5.2f} µs")
    print(f"a turn with two callbacks        {min(turn_with_two_callbacks() for _ in range(RUNS)):5.2f} µs")


if __name__ == "__main__":
    main()
