"""Store selection: `--store sqlite` (the default: one file under the data directory) or `--store etcd://…`.

The etcd backend (and grpcio with it) is imported only when chosen, so a SQLite server starts as before.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kubelite.store.interface import Store, Unavailable

SQLITE = "sqlite"


class StoreConfigError(ValueError):
    pass


@dataclass(frozen=True)
class StoreSpec:
    """What `--store` and `--etcd-cafile/--etcd-certfile/--etcd-keyfile` asked for, checked before start-up."""

    url: str = SQLITE
    etcd_cafile: Path | None = None
    etcd_certfile: Path | None = None
    etcd_keyfile: Path | None = None

    @property
    def is_etcd(self) -> bool:
        return self.url.startswith("etcd://")

    def check(self) -> None:
        if self.url != SQLITE and not self.is_etcd:
            raise StoreConfigError(f"--store: {self.url!r}: want sqlite or etcd://HOST:PORT[,HOST:PORT…]")
        tls = (self.etcd_cafile, self.etcd_certfile, self.etcd_keyfile)
        if not self.is_etcd and any(tls):
            raise StoreConfigError("--etcd-cafile/--etcd-certfile/--etcd-keyfile need --store etcd://…")
        for f in tls:
            if f is not None and not f.is_file():
                raise StoreConfigError(f"etcd TLS file {f} does not exist")
        if self.is_etcd:
            from kubelite.store.etcd.endpoints import EtcdConfigError, parse_url

            try:
                parse_url(self.url, *tls)
            except EtcdConfigError as exc:
                raise StoreConfigError(str(exc)) from None

    async def open(self, data_dir: Path) -> Store:
        if self.is_etcd:
            from kubelite.store.etcd import EtcdStore, parse_url

            try:
                return await EtcdStore.open(parse_url(self.url, self.etcd_cafile, self.etcd_certfile,
                                                      self.etcd_keyfile))
            except Unavailable as exc:  # at start-up this is a set-up problem: say so, no traceback
                raise StoreConfigError(f"--store {self.url}: {exc}") from None
        from kubelite.store.sqlite import SQLiteStore

        return await SQLiteStore.open(data_dir / "state.db")
