"""Container runtimes behind one `Runtime` Protocol (runtime/interface.py): real processes
(runtime/process.py) and hollow containers on the injected clock (runtime/hollow.py). The agent
is given one; pod sync never knows which."""
