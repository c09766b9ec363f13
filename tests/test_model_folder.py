"""A downloaded model folder (`SEMSEARCH_MODEL`), read as sentence-transformers lays one out: the
ONNX graph under `onnx/`, pooling from `1_Pooling/config.json`, normalisation from `modules.json`,
query and document prompts from `config_sentence_transformers.json`, the window from
`sentence_bert_config.json`. The shipped int8 MiniLM is laid out as such a folder twice (as it
is, and with CLS pooling and e5-style prompts), so identity and vectors must follow the files.
A model of another width is a tiny ONNX graph built here from ONNX operators (an embedding
lookup, 32 dimensions) with MiniLM's tokenizer: a stand-in for plumbing (width, pooling, the
index's vector column), not for quality."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer

import semsearch
from semsearch.embedder.model import Encoder, ModelError, model_from_dir, packaged_model

TEXT = "The harbour pilot boards incoming ships at the outer buoy."
E5 = {"query": "query: ", "passage": "passage: "}


def layout(
    folder: Path, pooling: str = "mean", prompts: dict[str, str] | None = None, max_length: int | None = None
) -> Path:
    """The packaged model's files as a sentence-transformers ONNX download has them."""
    packaged = packaged_model()
    (folder / "onnx").mkdir(parents=True)
    (folder / "onnx" / "model.onnx").symlink_to(packaged.onnx)
    shutil.copy(packaged.tokenizer, folder / "tokenizer.json")
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir()
    switches = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls",
                "pooling_mode_lasttoken": "lasttoken", "pooling_mode_max_tokens": "max"}  # fmt: skip
    config = {"word_embedding_dimension": 384, **{k: v == pooling for k, v in switches.items()}}
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(config))
    st = {"prompts": prompts or {}, "default_prompt_name": None, "similarity_fn_name": "cosine"}
    (folder / "config_sentence_transformers.json").write_text(json.dumps(st))
    if max_length:
        (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_length}))
    return folder


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_the_shipped_model_as_a_users_folder_gives_the_same_vectors_under_its_own_identity(tmp_path: Path) -> None:
    files = model_from_dir(layout(tmp_path / "minilm"))
    assert (files.pooling, files.normalize, files.query_prompt, files.document_prompt) == ("mean", True, "", "")
    folder = Encoder(files, compute="fp32")
    shipped = Encoder(packaged_model(), compute="fp32")
    assert cosine(folder.embed([TEXT])[0][0], shipped.embed([TEXT])[0][0]) > 0.9999
    assert folder.model_id.startswith("minilm@") and folder.model_id != shipped.model_id
    assert model_from_dir(tmp_path / "minilm").model_id == files.model_id  # the same files, the same identity


def test_pooling_prompts_and_window_come_from_the_folder_and_change_identity_and_vectors(tmp_path: Path) -> None:
    plain = model_from_dir(layout(tmp_path / "plain"))
    files = model_from_dir(layout(tmp_path / "e5-style", pooling="cls", prompts=E5, max_length=128))
    assert (files.pooling, files.query_prompt, files.document_prompt, files.max_length) == (
        "cls", "query: ", "passage: ", 128,
    )  # fmt: skip
    assert files.model_id.split("@")[1] != plain.model_id.split("@")[1]
    encoder, reference = Encoder(files, max_length=128, compute="fp32"), Encoder(plain, compute="fp32")
    document = encoder.embed([TEXT])[0][0]
    query = encoder.embed([TEXT], query=True)[0][0]
    assert cosine(document, reference.embed([TEXT])[0][0]) < 0.99  # CLS, not the mean
    assert cosine(document, query) < 0.999  # `passage: ` and `query: ` make different inputs
    assert abs(float(np.linalg.norm(document)) - 1) < 1e-5
    tokenizer = Tokenizer.from_file(str(files.tokenizer))
    tokenizer.no_padding()  # the shipped tokenizer.json pads to 128
    prompt = max(len(tokenizer.encode(p, add_special_tokens=False).ids) for p in E5.values())
    assert prompt >= 2 and encoder.window == 128 - prompt  # the chunker is told the room a prompt leaves


def test_a_folder_that_cannot_be_read_says_which_file_to_add(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    (bare / "onnx").mkdir(parents=True)
    (bare / "onnx" / "model.onnx").write_bytes(b"")
    with pytest.raises(ModelError, match="no tokenizer.json"):
        model_from_dir(bare)
    with pytest.raises(ModelError, match="pooling_mode_max_tokens"):
        model_from_dir(layout(tmp_path / "max", pooling="max"))
    several = layout(tmp_path / "several")
    (several / "onnx" / "model.onnx").rename(several / "onnx" / "model_O4.onnx")
    (several / "onnx" / "model_qint8_avx512.onnx").symlink_to(packaged_model().onnx)
    with pytest.raises(ModelError, match="several graphs .*model_O4.onnx.*SEMSEARCH_MODEL"):
        model_from_dir(several)
    assert model_from_dir(several / "onnx" / "model_O4.onnx").onnx.name == "model_O4.onnx"  # or name the file
    with pytest.raises(ModelError, match="no ONNX graph"):
        model_from_dir(tmp_path)


def tiny_model(folder: Path, width: int = 32) -> Path:
    """An embedding lookup: input_ids → last_hidden_state [batch, tokens, width]."""
    folder.mkdir()
    shutil.copy(packaged_model().tokenizer, folder / "tokenizer.json")
    vocab = json.loads((folder / "tokenizer.json").read_text())["model"]["vocab"]
    table = np.random.default_rng(7).standard_normal((len(vocab), width)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"], axis=0)],
        "tiny",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "tokens", width])],
        [numpy_helper.from_array(table, "table")],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), folder / "model.onnx")
    return folder


def test_a_model_of_another_width_indexes_and_searches_and_is_never_mixed(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus" / "harbour"
    corpus.mkdir(parents=True)
    (corpus / "pilots.md").write_text(f"# Pilots\n\n{TEXT}\n")
    (corpus / "tides.md").write_text("# Tides\n\nSpring tides follow the new and the full moon.\n")
    model = tiny_model(tmp_path / "tiny")
    with semsearch.connect(tmp_path / "data", model=model, corpus_root=tmp_path, model_compute="fp32") as db:
        db.add(corpus)
        assert db.index().files_processed == 2
        (hit, *_) = db.search("when do spring tides come", mode="vector", min_score=-1)
        assert hit.rel_path == "tides.md"
        status = db.status()
        assert status.embedder.dimension == 32 and (status.embedder.model_id or "").startswith("tiny@")
    # The shipped model over the same index: refused with what to do, never a mixed answer.
    with semsearch.connect(tmp_path / "data", corpus_root=tmp_path) as db, pytest.raises(Exception, match="rebuild"):
        db.search("spring tides")
