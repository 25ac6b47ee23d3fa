"""The agent's volumes beyond emptyDir and hostPath (which sandbox.py binds directly): claim volumes (claims.py)."""
