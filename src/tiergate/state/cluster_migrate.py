"""Move a cluster deployment's keys from the single-slot layout to the hash tags.

Before hash tags, `state.cluster: true` kept every key under the common tag
(`{tg}:<key>`). The gateway now reads session, router and workspace keys under
their own tags (state/cluster_keys.py), so without this step an upgrade starts
every session at base with fresh pins and, worse, forgets the day's and the
month's budget spend and the share-cap window. This copies each such key (value
and remaining TTL) to its new name and deletes the old one; keys that keep their
name (bandit arms, config version) are left alone. A new name that already
exists (a new gateway wrote it first) wins and the old key is kept, counted as
skipped. Run it once, with the old gateways stopped, before starting the new
ones:

    python -m tiergate.state.cluster_migrate redis://node-1:6379 [--prefix tg:]

The common slot is on one primary, so one SCAN there finds every old key.
"""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import dataclass

from tiergate.state.cluster_keys import cluster_key, common_prefix
from tiergate.state.redis_cluster import cluster_client


@dataclass(slots=True)
class Migrated:
    moved: int = 0
    skipped: int = 0
    kept: int = 0


async def migrate(url: str, key_prefix: str = "tg:", *, batch: int = 500) -> Migrated:
    """Copy every old-layout key under `key_prefix` to its hash-tagged name."""
    old_prefix = common_prefix(key_prefix)
    client = cluster_client(url, connect_timeout=5.0, socket_timeout=5.0)
    out = Migrated()
    try:
        await client.initialize()
        pattern = "".join("\\" + c if c in "*?[]\\" else c for c in old_prefix) + "*"
        old_keys = [k async for k in client.scan_iter(match=pattern, count=batch)]
        for raw in old_keys:
            old = raw.decode() if isinstance(raw, bytes) else str(raw)
            new = cluster_key(key_prefix, old[len(old_prefix) :])
            if new == old:
                out.kept += 1
                continue
            value, pttl = await client.get(old), await client.pttl(old)
            if value is None or pttl == -2:
                continue  # expired meanwhile
            ok = await client.set(new, value, px=pttl if pttl > 0 else None, nx=True)
            if ok:
                await client.delete(old)
                out.moved += 1
            else:
                out.skipped += 1
    finally:
        await client.aclose()
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("url", help="a seed node of the cluster, redis://host:port")
    p.add_argument("--prefix", default="tg:", help="state.key_prefix (default tg:)")
    args = p.parse_args(argv)
    result = asyncio.run(migrate(args.url, args.prefix))
    print(f"moved {result.moved}, kept {result.kept} (same name), skipped {result.skipped}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
