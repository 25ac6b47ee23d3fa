"""The node's service proxy (kube-proxy's nftables mode): ClusterIP and NodePort traffic DNATed to ready endpoints."""
