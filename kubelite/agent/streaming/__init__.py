"""The agent's streaming endpoints (kubelet's cri/streaming): exec, attach and port-forward.

kubectl v1.32 reaches them through the API server, which splices the upgraded connection through
unchanged (apiserver/streaming.py): exec and attach speak the WebSocket channel protocol
(channels.py), port-forward speaks SPDY/3.1 tunnelled in WebSocket binary messages (spdy.py).
"""
