"""Where the replica lives (ASH_REPLICA_URL plus `[replica]`) and Litestream's config for it.

Litestream 0.5 reads a YAML file; JSON is YAML, so the file is written with the standard
library. It holds no secret: Litestream reads its credentials from its own `LITESTREAM_*` or
`AWS_*` variables, and the file is read with `-no-expand-env` so nothing in it is expanded.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from lib.config import Settings
from lib.errors import ConfigError

CONFIG_NAME = "litestream.yml"
# Litestream's own defaults, written out so the guide's figures (docs/deploy/fly.md) follow the file: it checkpoints
# the WAL itself (PASSIVE) once it holds this many pages, or this often.
MIN_CHECKPOINT_PAGES = 1000
CHECKPOINT_INTERVAL = "1m"
# A full snapshot a day; point-in-time restores reach back `retention_hours` (default 7 days).
SNAPSHOT_INTERVAL = "24h"


@dataclass(frozen=True)
class Replica:
    """One database replicated to one S3-compatible location."""

    database: Path
    bucket: str
    path: str
    endpoint: str | None
    region: str
    sync_interval: float
    retention_hours: float

    @property
    def url(self) -> str:
        """The replica's address as the user gave it (no credentials are ever part of it)."""
        return f"s3://{self.bucket}/{self.path}"

    @property
    def plain_http(self) -> bool:
        """A local endpoint without TLS (MinIO on loopback, a test server)."""
        return bool(self.endpoint and self.endpoint.startswith("http://"))


def parse_url(url: str) -> tuple[str, str]:
    """`s3://bucket/path` as (bucket, path); ConfigError for anything else."""
    parts = urlsplit(url)
    path = parts.path.strip("/")
    if parts.scheme != "s3" or not parts.netloc or not path or parts.query or "@" in parts.netloc:
        raise ConfigError(
            "ASH_REPLICA_URL: expected s3://bucket/path (credentials go in LITESTREAM_* or AWS_* variables), "
            f"got {url!r}"
        )
    return parts.netloc, path


def replica_of(settings: Settings) -> Replica | None:
    """The configured replica, or None when ASH_REPLICA_URL is not set."""
    if not settings.replica_url:
        return None
    bucket, path = parse_url(settings.replica_url)
    config = settings.config.replica
    return Replica(
        database=settings.database_path.resolve(),
        bucket=bucket,
        path=path,
        endpoint=config.endpoint.rstrip("/") if config.endpoint else None,
        region=config.region,
        sync_interval=config.sync_interval,
        retention_hours=config.retention_hours,
    )


def _duration(seconds: float) -> str:
    return f"{int(seconds * 1000)}ms"


def litestream_config(replica: Replica) -> dict:
    """Litestream's configuration for this replica (see litestream.io/reference/config)."""
    target: dict = {
        "type": "s3",
        "bucket": replica.bucket,
        "path": replica.path,
        "region": replica.region,
        "sync-interval": _duration(replica.sync_interval),
    }
    if replica.endpoint:
        # Path-style addressing: MinIO and most self-hosted stores have no per-bucket host names.
        target.update(endpoint=replica.endpoint, **{"force-path-style": True})
    return {
        "snapshot": {"interval": SNAPSHOT_INTERVAL, "retention": f"{int(replica.retention_hours)}h"},
        "dbs": [
            {
                "path": str(replica.database),
                "min-checkpoint-page-count": MIN_CHECKPOINT_PAGES,
                "checkpoint-interval": CHECKPOINT_INTERVAL,
                "replica": target,
            }
        ],
    }


def write_config(replica: Replica, folder: Path) -> Path:
    """Write Litestream's config file into `folder` (the data folder) and return its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CONFIG_NAME
    text = json.dumps(litestream_config(replica), indent=2) + "\n"
    if not path.is_file() or path.read_text(encoding="utf-8") != text:
        staged = path.with_name(path.name + ".tmp")
        staged.write_text(text, encoding="utf-8")
        os.replace(staged, path)
    return path
