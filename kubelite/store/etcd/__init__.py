"""The etcd store backend: `kubelite server --store etcd://HOST:PORT[,HOST:PORT…]`."""

from kubelite.store.etcd.endpoints import EtcdConfig, parse_url
from kubelite.store.etcd.store import EtcdStore

__all__ = ["EtcdConfig", "EtcdStore", "parse_url"]
