"""Where the index lives: a local directory (the default, under the data dir) or a prefix on
object storage that LanceDB reaches (`s3://bucket/prefix`, `az://container/prefix`; `gs://` as
LanceDB accepts it), with the standard credential and endpoint variables (`AWS_ENDPOINT_URL`,
`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`; `AZURE_STORAGE_ACCOUNT_NAME`,
`AZURE_STORAGE_ACCOUNT_KEY`). The index's small JSON files (its
identity, what a pass skipped) sit beside its tables, so the store holds the whole index.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pyarrow.fs as pafs

from semsearch.config import Settings


class StoreUnavailable(RuntimeError):
    """The index's store cannot be reached or used; the message names the URI and what failed
    (never a credential)."""


AZURE_SCHEMES = ("az", "abfs", "abfss")


@dataclass(frozen=True)
class StoredFile:
    """An object under an index's prefix: its path relative to the prefix, size, and the store's
    modification time (nanoseconds since the epoch; 0 when the store gives none)."""

    path: str
    size: int
    mtime_ns: int
    is_dir: bool


@dataclass
class IndexLocation:
    uri: str
    storage_options: dict[str, str] = field(default_factory=dict)
    _fs: tuple[pafs.FileSystem, str] | None = field(default=None, repr=False)

    @classmethod
    def from_settings(cls, settings: Settings) -> IndexLocation:
        uri = settings.index_uri or str(settings.index_dir)
        if "://" not in uri:
            return cls(uri)
        return cls(uri.rstrip("/"), {"allow_http": "true"} if settings.s3_allow_http else {})

    @property
    def local(self) -> Path | None:
        """The directory, for an index on local disk."""
        return None if "://" in self.uri else Path(self.uri)

    def __str__(self) -> str:
        return self.uri

    @property
    def to_check(self) -> str:
        """What an operator checks when the store cannot be used, in its scheme's variables."""
        scheme = urlparse(self.uri).scheme
        if scheme in AZURE_SCHEMES:
            return "the container and prefix, AZURE_STORAGE_ACCOUNT_NAME and AZURE_STORAGE_ACCOUNT_KEY"
        if scheme == "gs":
            return "the bucket and prefix and GOOGLE_APPLICATION_CREDENTIALS"
        return (
            "the bucket and prefix, AWS_ENDPOINT_URL and the credentials (SEMSEARCH_S3_ALLOW_HTTP=true for a "
            "plain-HTTP endpoint)"
        )

    def _remote(self) -> tuple[pafs.FileSystem, str]:
        if self._fs is None:
            parsed = urlparse(self.uri)
            if parsed.scheme == "s3":
                endpoint = urlparse(os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "")
                fs = pafs.S3FileSystem(
                    region=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
                    endpoint_override=endpoint.netloc or None,
                    scheme=endpoint.scheme or "https",
                )
                self._fs = (fs, f"{parsed.netloc}{parsed.path}")
            elif parsed.scheme in AZURE_SCHEMES:
                self._fs = (azure_filesystem(), f"{parsed.netloc}{parsed.path}")
            else:
                self._fs = pafs.FileSystem.from_uri(self.uri)
        return self._fs

    def read_json(self, name: str) -> Any | None:
        try:
            if (directory := self.local) is not None:
                path = directory / name
                return json.loads(path.read_text()) if path.exists() else None
            fs, root = self._remote()
            with fs.open_input_stream(f"{root}/{name}") as f:
                return json.loads(f.read())
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StoreUnavailable(f"cannot read {name} of the index at {self.uri}: {reason(exc)}") from exc

    def write_json(self, name: str, value: Any) -> None:
        """Whole or not at all: a local file is replaced by rename, an object by one PUT."""
        data = json.dumps(value, indent=2, default=str).encode()
        if (directory := self.local) is not None:
            tmp = directory / f"{name}.tmp"
            tmp.write_bytes(data)
            tmp.replace(directory / name)
            return
        fs, root = self._remote()
        try:
            with fs.open_output_stream(f"{root}/{name}") as f:
                f.write(data)
        except OSError as exc:
            raise StoreUnavailable(f"cannot write {name} of the index at {self.uri}: {reason(exc)}") from exc

    def modified(self, name: str) -> datetime | None:
        """When `name` was last written, by the store's own clock (an object's Last-Modified, a
        file's mtime); None if it does not exist."""
        try:
            if (directory := self.local) is not None:
                path = directory / name
                return datetime.fromtimestamp(path.stat().st_mtime, UTC) if path.exists() else None
            fs, root = self._remote()
            info = fs.get_file_info(f"{root}/{name}")
        except OSError as exc:
            raise StoreUnavailable(f"cannot read {name} of the index at {self.uri}: {reason(exc)}") from exc
        if info.type == pafs.FileType.NotFound or info.mtime is None:
            return None
        mtime: datetime = info.mtime
        return mtime if mtime.tzinfo else mtime.replace(tzinfo=UTC)

    def store_now(self, probe: str) -> datetime:
        """The store's clock now: the time it stamps on a small object written for the purpose.
        Leases are judged on it, so a machine whose own clock runs ahead cannot see a live lease
        as lapsed."""
        self.write_json(probe, {"at": "now"})
        stamp = self.modified(probe)
        if stamp is None:
            raise StoreUnavailable(f"the index at {self.uri} did not keep {probe} just written; is the store healthy?")
        return stamp

    def delete(self, name: str) -> None:
        if (directory := self.local) is not None:
            (directory / name).unlink(missing_ok=True)
            return
        fs, root = self._remote()
        with contextlib.suppress(FileNotFoundError):
            fs.delete_file(f"{root}/{name}")

    def listing(self, sub: str = "", recursive: bool = True) -> list[StoredFile]:
        """The objects under `sub` (a path relative to the index's prefix), with their sizes and
        modification times; directories only when not `recursive`. Empty when nothing is there."""
        fs, root = self._remote()
        base = f"{root}/{sub}".rstrip("/")
        try:
            infos = fs.get_file_info(pafs.FileSelector(base, recursive=recursive, allow_not_found=True))
        except OSError as exc:
            raise StoreUnavailable(f"cannot list the index at {self.uri}: {reason(exc)}") from exc
        out = []
        for info in infos:
            rel = info.path[len(root) + 1 :]
            if info.type == pafs.FileType.File:
                stamp = info.mtime_ns if info.mtime_ns is not None else 0
                out.append(StoredFile(rel, info.size or 0, stamp, False))
            elif info.type == pafs.FileType.Directory and not recursive:
                out.append(StoredFile(rel, 0, 0, True))
        return out

    def download(self, rel: str, dest: Path) -> None:
        """One object, streamed to `dest` (a new file: the caller renames it into place).
        FileNotFoundError when the store no longer has it."""
        fs, root = self._remote()
        try:
            with fs.open_input_stream(f"{root}/{rel}") as src, dest.open("wb") as out:
                while block := src.read(8 << 20):
                    out.write(block)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise StoreUnavailable(f"cannot read {rel} of the index at {self.uri}: {reason(exc)}") from exc

    def size(self) -> int:
        if (directory := self.local) is not None:
            return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())
        fs, root = self._remote()
        try:
            infos = fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True))
        except OSError:
            return 0
        return sum(i.size or 0 for i in infos if i.type == pafs.FileType.File)


def azure_filesystem() -> pafs.AzureFileSystem:
    """Azure Blob Storage as LanceDB reaches it: the standard AZURE_STORAGE_ACCOUNT_NAME and
    AZURE_STORAGE_ACCOUNT_KEY (without a key, Azure's default credential chain), and with
    AZURE_STORAGE_USE_EMULATOR=true the Azurite emulator at AZURITE_BLOB_STORAGE_URL."""
    account = os.environ.get("AZURE_STORAGE_ACCOUNT_NAME") or ""
    key = os.environ.get("AZURE_STORAGE_ACCOUNT_KEY") or None
    if os.environ.get("AZURE_STORAGE_USE_EMULATOR", "").lower() not in ("1", "true"):
        return pafs.AzureFileSystem(account_name=account, account_key=key)
    url = urlparse(os.environ.get("AZURITE_BLOB_STORAGE_URL") or "http://127.0.0.1:10000")
    return pafs.AzureFileSystem(
        account_name=account, account_key=key, blob_storage_authority=url.netloc, blob_storage_scheme=url.scheme,
        dfs_storage_authority=url.netloc, dfs_storage_scheme=url.scheme,
    )  # fmt: skip


# What storage errors say, in the words an operator acts on. LanceDB's errors are the whole
# request chain on one line; the first match below names the cause.
CAUSES = (
    ("tcp connect error", "nothing answers at the endpoint"),
    ("dns error", "the endpoint's host name does not resolve"),
    ("NoSuchBucket", "the bucket does not exist"),
    ("InvalidAccessKeyId", "the store does not know the access key (AWS_ACCESS_KEY_ID)"),
    ("SignatureDoesNotMatch", "the secret key is wrong (AWS_SECRET_ACCESS_KEY)"),
    ("AccessDenied", "the credentials may not use this bucket"),
    ("403 Forbidden", "the store refused the credentials"),
    ("builder error", "the endpoint is plain HTTP: set SEMSEARCH_S3_ALLOW_HTTP=true, or use https"),
    ("HTTP is not allowed", "the endpoint is plain HTTP: set SEMSEARCH_S3_ALLOW_HTTP=true, or use https"),
)


def reason(exc: BaseException) -> str:
    """Why a storage call failed, in one short clause (never the request dump, never a key)."""
    text = str(exc)
    for marker, cause in CAUSES:
        if marker in text:
            return cause
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return first[:200]
