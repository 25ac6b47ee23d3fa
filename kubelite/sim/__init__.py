"""Simulation mode (G5): the real control plane and hollow node agents in one process on virtual time.

A composition root like `kubelite.cli`: it wires the same components — API server, scheduler,
controllers, node agents with the hollow runtime — through the in-process transport, on an event
loop whose clock jumps to the next timer whenever every task waits (`clock.py`).
"""
