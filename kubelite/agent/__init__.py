"""The node agent: runs a node's pods as local processes with the Kubernetes pod lifecycle."""
