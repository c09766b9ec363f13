"""The REST client every non-API part uses (indexer, CLI, MCP bridge)."""

from __future__ import annotations

import contextlib
import os
import tarfile
from collections.abc import Generator
from contextvars import ContextVar
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from semsearch import timing
from semsearch.config import Settings
from semsearch.schemas import (
    SNAPSHOT_MANIFEST,
    Calibration,
    ClaimIn,
    Explained,
    FileContent,
    Folder,
    FolderIn,
    GatherRequest,
    GatherResponse,
    GrepRequest,
    GrepResponse,
    IndexBatch,
    IndexBatchResult,
    Lease,
    LeaseIn,
    Manifest,
    ModelSwitch,
    ModelSwitchIn,
    Optimized,
    Outline,
    Run,
    RunFinish,
    RunProgress,
    RunRequest,
    SearchRequest,
    SearchResponse,
    SkippedIn,
    SnapshotImported,
    SnapshotManifest,
    Status,
    Symbols,
    Synced,
    TokenCreated,
    TokenIn,
    TokenView,
)

# The token of the caller a bridge acts for (an MCP client's own scoped token), set per call;
# when unset, the client's own token is sent.
CALLER_TOKEN: ContextVar[str | None] = ContextVar("semsearch_caller_token", default=None)


class _Bearer(httpx.Auth):
    def __init__(self, secret: str | None) -> None:
        self.secret = secret

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = CALLER_TOKEN.get() or self.secret
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        yield request


# A snapshot moves a whole index in one request, and an import answers once it is swapped in.
SNAPSHOT_TIMEOUT = httpx.Timeout(30.0, read=3600.0, write=3600.0)


class ApiError(RuntimeError):
    """The API answered with an error; `str()` is its problem-details message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ApiUnreachable(ApiError):
    """Nothing answers at the API URL."""


def segment(value: str) -> str:
    """A name or id as one URL path segment: `/`, `..` and `?` cannot change which endpoint is called."""
    return quote(value, safe="") if value not in (".", "..") else quote(value.replace(".", "%2E"), safe="%")


class ApiClient:
    def __init__(self, settings: Settings, url: str | None = None, token: str | None = None, http: Any = None) -> None:
        """`url`/`token`, when given, replace the settings' (a project's machine-local file). `http`:
        an HTTP client with httpx's interface to speak through instead of a new one (e.g. an ASGI
        app's in-process test client, which carries its own base URL and headers)."""
        self.url = (url or settings.api_url).rstrip("/")
        if url is None and token is None:
            secret = settings.token.get_secret_value() if settings.token else None
        else:  # a URL from elsewhere goes with that place's token only, never the settings'
            secret = token
        self._http: httpx.Client = http or httpx.Client(
            base_url=self.url, auth=_Bearer(secret), timeout=settings.api_timeout_s
        )
        self.last_timings: dict[str, float] = {}  # the last answer's Server-Timing stages, in ms

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc
        self._check(response)
        self.last_timings = timing.parse(response.headers.get(timing.HEADER))
        return None if response.status_code == 204 else response.json()

    def _unreachable(self, exc: httpx.TransportError) -> ApiUnreachable:
        return ApiUnreachable(
            0,
            f"semsearch API not reachable at {self.url} ({type(exc).__name__}); "
            "start it with `semsearch serve` (or `docker compose up -d`), or set SEMSEARCH_URL",
        )

    @staticmethod
    def _check(response: httpx.Response) -> None:
        if response.is_error:
            try:
                body = response.json()
                detail = body.get("detail") or body.get("title") or response.text
            except ValueError:
                detail = response.text
            raise ApiError(response.status_code, f"{response.status_code}: {detail}")

    # --- corpus ------------------------------------------------------------------

    def folders(self) -> list[Folder]:
        return [Folder.model_validate(f) for f in self._request("GET", "/v1/folders")]

    def add_folder(
        self,
        path: str | None,
        name: str | None = None,
        allow_outside_root: bool = False,
        url: str | None = None,
        branch: str | None = None,
    ) -> Folder:
        body = FolderIn(path=path, name=name, allow_outside_root=allow_outside_root, url=url, branch=branch)
        return Folder.model_validate(self._request("POST", "/v1/folders", json=body.dump()))

    def sync_folder(self, name: str) -> Synced:
        return Synced.model_validate(self._request("POST", f"/v1/folders/{segment(name)}/sync"))

    def remove_folder(self, name: str, keep_index: bool = False) -> Folder:
        params = {"keep_index": "true" if keep_index else "false"}
        return Folder.model_validate(self._request("DELETE", f"/v1/folders/{segment(name)}", params=params))

    # --- indexing ----------------------------------------------------------------

    def manifest(self, folder: str) -> Manifest:
        return Manifest.model_validate(self._request("GET", f"/v1/folders/{segment(folder)}/manifest"))

    def apply(self, folder: str, batch: IndexBatch) -> IndexBatchResult:
        return IndexBatchResult.model_validate(
            self._request("POST", f"/v1/folders/{segment(folder)}/batches", json=batch.dump())
        )

    def report_skipped(self, folder: str, lease: str | None, skipped_by: dict[str, int]) -> None:
        body = SkippedIn(lease=lease, skipped_by=skipped_by).dump()
        self._request("PUT", f"/v1/folders/{segment(folder)}/skipped", json=body)

    def take_lease(self, folder: str, holder: str) -> Lease:
        return Lease.model_validate(
            self._request("POST", f"/v1/folders/{segment(folder)}/lease", json=LeaseIn(holder=holder).dump())
        )

    def release_lease(self, folder: str, lease_id: str) -> None:
        with contextlib.suppress(httpx.TransportError):  # an unreleased lease expires by itself
            self._http.delete(f"/v1/folders/{segment(folder)}/lease/{segment(lease_id)}")

    def optimize(self) -> Optimized:
        return Optimized.model_validate(self._request("POST", "/v1/index/optimize"))

    def explain(self, path: str) -> Explained:
        return Explained.model_validate(self._request("GET", "/v1/explain", params={"path": path}))

    def calibration(self, pairs: int = 500) -> Calibration:
        return Calibration.model_validate(self._request("GET", "/v1/calibration", params={"pairs": pairs}))

    def reset_index(self) -> None:
        self._request("POST", "/v1/index/reset", json={"confirm": True})

    # --- a switch to another model -----------------------------------------------------

    def switch_model(self, request: ModelSwitchIn) -> ModelSwitch:
        return ModelSwitch.model_validate(self._request("POST", "/v1/model/switch", json=request.dump()))

    def model_switch(self) -> ModelSwitch:
        return ModelSwitch.model_validate(self._request("GET", "/v1/model/switch"))

    def cancel_switch(self) -> ModelSwitch:
        return ModelSwitch.model_validate(self._request("DELETE", "/v1/model/switch"))

    # --- requested runs ------------------------------------------------------------

    def request_run(self, request: RunRequest) -> Run:
        return Run.model_validate(self._request("POST", "/v1/runs", json=request.dump()))

    def runs(self) -> list[Run]:
        return [Run.model_validate(r) for r in self._request("GET", "/v1/runs")]

    def run(self, run_id: str, wait: float = 0) -> Run:
        return Run.model_validate(self._request("GET", f"/v1/runs/{segment(run_id)}", params={"wait": wait}))

    def cancel_run(self, run_id: str) -> Run:
        return Run.model_validate(self._request("DELETE", f"/v1/runs/{segment(run_id)}"))

    def claim_run(self, worker: str, wait_s: float = 20) -> Run | None:
        try:
            response = self._http.post(
                "/v1/runs/claim", json=ClaimIn(worker=worker, wait_s=wait_s).dump(), timeout=wait_s + 30
            )
        except httpx.TransportError as exc:
            raise ApiUnreachable(0, f"semsearch API not reachable at {self.url} ({type(exc).__name__})") from exc
        if response.status_code == 204:
            return None
        if response.is_error:
            raise ApiError(response.status_code, f"{response.status_code}: {response.text}")
        return Run.model_validate(response.json())

    def run_progress(self, run_id: str, progress: RunProgress) -> Run:
        """The run as the API has it now, with the files asked for meanwhile (`urgent`)."""
        return Run.model_validate(self._request("POST", f"/v1/runs/{segment(run_id)}/progress", json=progress.dump()))

    def finish_run(self, run_id: str, result: RunFinish) -> None:
        self._request("POST", f"/v1/runs/{segment(run_id)}/finish", json=result.dump())

    # --- search & status -----------------------------------------------------------

    def search(self, request: SearchRequest) -> SearchResponse:
        return SearchResponse.model_validate(self._request("POST", "/v1/search", json=request.dump()))

    def gather(self, request: GatherRequest) -> GatherResponse:
        return GatherResponse.model_validate(self._request("POST", "/v1/gather", json=request.dump()))

    def read_file(self, path: str, start_line: int = 1, end_line: int | None = None) -> FileContent:
        params: dict[str, Any] = {"path": path, "startLine": start_line}
        if end_line is not None:
            params["endLine"] = end_line
        return FileContent.model_validate(self._request("GET", "/v1/files", params=params))

    def symbols(
        self, name: str, kind: list[str] | None = None, folder: list[str] | None = None, limit: int = 50
    ) -> Symbols:
        params = {"name": name, "kind": kind or [], "folder": folder or [], "limit": limit}
        return Symbols.model_validate(self._request("GET", "/v1/symbols", params=params))

    def outline(self, path: str) -> Outline:
        return Outline.model_validate(self._request("GET", "/v1/outline", params={"path": path}))

    def grep(self, request: GrepRequest) -> GrepResponse:
        return GrepResponse.model_validate(self._request("POST", "/v1/grep", json=request.dump()))

    def status(self) -> Status:
        return Status.model_validate(self._request("GET", "/v1/status"))

    # --- tokens --------------------------------------------------------------------

    def tokens(self) -> list[TokenView]:
        return [TokenView.model_validate(t) for t in self._request("GET", "/v1/tokens")]

    def create_token(
        self,
        name: str,
        scope: str,
        folders: list[str] | None = None,
        rate_per_s: float | None = None,
        long_polls: int | None = None,
    ) -> TokenCreated:
        body = TokenIn(name=name, scope=scope, folders=folders, rate_per_s=rate_per_s, long_polls=long_polls)  # type: ignore[arg-type]
        return TokenCreated.model_validate(self._request("POST", "/v1/tokens", json=body.dump()))

    def revoke_token(self, name: str) -> TokenView:
        return TokenView.model_validate(self._request("DELETE", f"/v1/tokens/{segment(name)}"))

    # --- snapshots -----------------------------------------------------------------

    def export_snapshot(
        self, dest: Path, folders: list[str] | None = None, root: str | None = None
    ) -> SnapshotManifest:
        """Streams an archive of these folders' index (all when none) to `dest`; a transfer that
        fails leaves no file there."""
        params: dict[str, Any] = {"folder": folders or []} | ({"root": root} if root else {})
        partial = dest.with_name(f"{dest.name}.partial")
        try:
            with self._http.stream("GET", "/v1/snapshot", params=params, timeout=SNAPSHOT_TIMEOUT) as response:
                if response.is_error:
                    response.read()
                    self._check(response)
                with partial.open("wb") as out:
                    for block in response.iter_bytes(1024 * 1024):
                        out.write(block)
            os.replace(partial, dest)
        except httpx.TransportError as exc:
            raise self._unreachable(exc) from exc
        finally:
            partial.unlink(missing_ok=True)
        return snapshot_manifest(dest)

    def import_snapshot(
        self, archive: Path, root: str | None = None, allow_outside_root: bool = False
    ) -> SnapshotImported:
        params: dict[str, Any] = {"allowOutsideRoot": allow_outside_root} | ({"root": root} if root else {})
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(archive.stat().st_size)}
        with archive.open("rb") as body:
            answer = self._request(
                "PUT", "/v1/snapshot", params=params, content=body, headers=headers, timeout=SNAPSHOT_TIMEOUT
            )
        return SnapshotImported.model_validate(answer)


def snapshot_manifest(archive: Path) -> SnapshotManifest:
    """What a snapshot archive says about itself (its first member), without unpacking it."""
    try:
        with tarfile.open(archive, "r:") as tar:
            first = tar.next()
            source = tar.extractfile(first) if first is not None and first.name == SNAPSHOT_MANIFEST else None
            if source is None:
                raise ApiError(0, f"{archive} is not a semsearch snapshot (no {SNAPSHOT_MANIFEST} at its start)")
            return SnapshotManifest.model_validate_json(source.read())
    except (OSError, tarfile.TarError, ValueError) as exc:
        raise ApiError(0, f"{archive} cannot be read as a snapshot: {exc}") from exc
