"""Embedding through an OpenAI-compatible endpoint (`SEMSEARCH_EMBEDDINGS_URL`): the embedder
service forwards to `/embeddings`, so the engine, the indexer and the gRPC contract are unchanged.

No third-party embedding server that can serve a local model offline installs from the
registries this project may use, so the server here is a **stand-in written from OpenAI's
published API reference** (`POST /v1/embeddings`: `input` as a list, `encoding_format` float or
base64, `data[i].index`, bearer auth, errors as `{"error": {"message"}}`), embedding with the
shipped MiniLM so results mean something. It scripts what real servers do: a batch limit refused
with 400, 429 with `Retry-After`, a 503, a response slower than the client's timeout."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import semsearch
from semsearch.embedder.client import EmbedderClient
from semsearch.embedder.endpoint import EndpointError
from semsearch.embedder.model import Encoder, packaged_model
from tests.processes import Service, clean_env, free_port, start_embedder

KEY = "endpoint-key-7f3a9c"  # must never show in an error or a log
MAX_INPUTS = 8


@dataclass
class StandIn:
    """The stand-in server's state: its script of faults, and what it was sent."""

    port: int
    faults: list[str] = field(default_factory=list)  # consumed one per bulk call: "429", "503", "slow"
    calls: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture(scope="module")
def stand_in() -> Iterator[StandIn]:
    encoder = Encoder(packaged_model(), compute="fp32")
    state = StandIn(free_port())

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:  # quiet
            pass

        def answer(self, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
            with state.lock:
                state.calls.append({"n": len(inputs), "format": body.get("encoding_format"),
                                    "auth": self.headers.get("Authorization"), "model": body.get("model")})  # fmt: skip
                fault = state.faults.pop(0) if state.faults and len(inputs) > 1 else None
            if self.path != "/v1/embeddings":
                return self.answer(404, {"error": {"message": f"no route {self.path}"}})
            if self.headers.get("Authorization") != f"Bearer {KEY}":
                refusal = {"message": "Incorrect API key provided", "type": "invalid_request_error"}
                return self.answer(401, {"error": refusal})
            if len(inputs) > MAX_INPUTS:
                return self.answer(400, {"error": {"message": f"Too many inputs: at most {MAX_INPUTS} per request"}})
            if fault == "429":
                return self.answer(429, {"error": {"message": "Rate limit reached"}}, {"Retry-After": "1"})
            if fault == "503":
                return self.answer(503, {"error": {"message": "The server is overloaded"}})
            if fault == "slow":
                time.sleep(3)  # the stand-in being slow: longer than the client's 2 s timeout
            vectors = encoder.embed(inputs)[0]
            if body.get("encoding_format") == "base64":
                data = [base64.b64encode(v.astype("<f4").tobytes()).decode() for v in vectors]
            else:
                data = [v.tolist() for v in vectors]
            order = list(range(len(inputs)))[::-1]  # `index` says which input: never trust the order
            items = [{"object": "embedding", "index": i, "embedding": data[i]} for i in order]
            usage = {"prompt_tokens": 1, "total_tokens": 1}
            self.answer(200, {"object": "list", "model": body["model"], "usage": usage, "data": items})

    server = ThreadingHTTPServer(("127.0.0.1", state.port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield state
    server.shutdown()
    thread.join(timeout=10)


def corpus(root: Path) -> Path:
    folder = root / "harbour"
    folder.mkdir(parents=True)
    topics = ["pilots board ships at the outer buoy", "spring tides follow the new and full moon",
              "the lighthouse keeper trims the lamp at dusk", "fishing boats unload at the north quay",
              "the harbour master assigns the moorings", "dredgers keep the channel deep enough",
              "customs officers inspect the cargo manifests", "the ferry leaves for the island every hour",
              "gulls nest on the breakwater in spring", "the chandlery sells rope, paint and charts",
              "a storm surge flooded the harbour road", "tugboats turn the tankers in the basin"]  # fmt: skip
    for number, topic in enumerate(topics):
        (folder / f"note-{number:02}.md").write_text(f"# Note {number}\n\nIn our harbour, {topic}.\n")
    return folder


def test_indexing_and_search_go_through_the_endpoint_within_its_limits_and_faults(
    stand_in: StandIn, tmp_path: Path
) -> None:
    stand_in.faults[:] = ["429", "503", "slow"]
    stand_in.calls.clear()
    settings: dict[str, Any] = {"embeddings_url": stand_in.url, "embeddings_model": "minilm-stand-in",
                                "embeddings_key": KEY, "embeddings_timeout_s": 2.0}  # fmt: skip
    settings["corpus_root"] = tmp_path
    with semsearch.connect(tmp_path / "data", **settings) as db:
        db.add(corpus(tmp_path / "corpus"))
        assert db.index().files_processed == 12
        (hit, *_) = db.search("when is the water highest", mode="vector")
        assert hit.rel_path == "note-01.md"
        status = db.status()
    assert status.embedder.model_id == f"minilm-stand-in@127.0.0.1:{stand_in.port}/v1"
    assert status.embedder.dimension == 384
    served = [c for c in stand_in.calls if c["n"] <= MAX_INPUTS]
    assert sum(c["n"] for c in served) >= 12 and max(c["n"] for c in stand_in.calls) > MAX_INPUTS  # halved to fit
    assert stand_in.faults == []  # the 429 (after its Retry-After), the 503 and the slow call were all retried
    assert {c["format"] for c in stand_in.calls} == {"base64"}
    assert {c["auth"] for c in stand_in.calls} == {f"Bearer {KEY}"}


def test_a_misconfigured_endpoint_is_one_line_naming_the_url_and_status(stand_in: StandIn, tmp_path: Path) -> None:
    wrong: dict[str, Any] = {"embeddings_url": stand_in.url, "embeddings_model": "m", "embeddings_key": "not-the-key"}
    with pytest.raises(EndpointError) as refused:
        semsearch.connect(tmp_path / "a", **wrong)
    said = str(refused.value)
    assert f"{stand_in.url}/embeddings answered 401" in said and "SEMSEARCH_EMBEDDINGS_KEY" in said
    assert "not-the-key" not in said and "\n" not in said
    with pytest.raises(EndpointError, match="answered 404 .*ends in /v1"):
        semsearch.connect(tmp_path / "b", embeddings_url=f"http://127.0.0.1:{stand_in.port}", embeddings_model="m",
                          embeddings_key=KEY)  # fmt: skip
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(EndpointError, match="cannot be reached"):
        semsearch.connect(tmp_path / "c", embeddings_url=dead, embeddings_model="m")


def test_the_embedder_service_forwards_over_grpc_and_a_dead_endpoint_stops_it_with_one_line(
    stand_in: StandIn, tmp_path: Path
) -> None:
    env = {"SEMSEARCH_EMBEDDINGS_URL": stand_in.url, "SEMSEARCH_EMBEDDINGS_MODEL": "minilm-stand-in",
           "SEMSEARCH_EMBEDDINGS_KEY": KEY}  # fmt: skip
    embedder, address = start_embedder(tmp_path / "embedder.log", None, **env)
    try:
        client = EmbedderClient(address)
        info = client.info()
        assert info.model_id.startswith("minilm-stand-in@") and info.dimension == 384
        local = Encoder(packaged_model(), compute="fp32").embed(["gulls nest on the breakwater"])[0][0]
        assert float(client.embed(["gulls nest on the breakwater"], query=True)[0] @ local) > 0.9999
    finally:
        embedder.stop()
    log = tmp_path / "dead.log"
    dead = Service("semsearch.embedder", clean_env(SEMSEARCH_EMBEDDER_PORT=str(free_port()),
                   SEMSEARCH_EMBEDDINGS_URL=stand_in.url, SEMSEARCH_EMBEDDINGS_MODEL="m",
                   SEMSEARCH_EMBEDDINGS_KEY="wrong-key-123"), log).start()  # fmt: skip
    assert dead.proc is not None and dead.proc.wait(timeout=60) != 0
    text = log.read_text()
    assert "answered 401" in text and stand_in.url in text and "wrong-key-123" not in text
