"""Running `nft`: apply a script, delete a table, find the tables of proxies that are gone.

Each proxy's table is named after its process (`kubelite-proxy-<pid>`), so proxies of clusters
sharing one host never overwrite each other, and a proxy starting after a crash can tell which
tables nobody owns any more and delete them.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil

import orjson

PREFIX = "kubelite-proxy-"
_OWNED = re.compile(rf"^{PREFIX}(\d+)(-.*)?$")


class NftError(Exception):
    """nft is missing, not permitted (no CAP_NET_ADMIN), or refused a script."""


def available() -> bool:
    return shutil.which("nft") is not None


async def run(*args: str, script: str | None = None) -> str:
    try:
        proc = await asyncio.create_subprocess_exec("nft", *args, stdin=asyncio.subprocess.PIPE,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    except OSError as exc:
        raise NftError(f"cannot run nft: {exc}") from exc
    out, err = await proc.communicate(script.encode() if script is not None else None)
    if proc.returncode != 0:
        raise NftError(err.decode(errors="replace").strip() or f"nft exited {proc.returncode}")
    return out.decode()


async def apply(script: str) -> None:
    await run("-f", "-", script=script)


async def tables() -> list[str]:
    """The names of this host's `ip` family tables."""
    doc = orjson.loads(await run("-j", "list", "tables", "ip"))
    return [item["table"]["name"] for item in doc.get("nftables", []) if "table" in item]


async def delete_table(name: str) -> None:
    try:
        await run("delete", "table", "ip", name)
    except NftError as exc:
        if "No such file or directory" not in str(exc):
            raise


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


async def delete_orphans() -> list[str]:
    """Delete the tables of proxies whose process is gone (a crash left them); returns their names."""
    gone = []
    for name in await tables():
        match = _OWNED.match(name)
        if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            await delete_table(name)
            gone.append(name)
    return gone


def table_name(suffix: str = "") -> str:
    return f"{PREFIX}{os.getpid()}" + (f"-{suffix}" if suffix else "")


class Nft:
    """The host's nftables, as the proxier uses it (tests substitute a recording fake)."""

    async def apply(self, script: str) -> None:
        await apply(script)

    async def delete_table(self, name: str) -> None:
        await delete_table(name)

    async def delete_orphans(self) -> list[str]:
        return await delete_orphans()
