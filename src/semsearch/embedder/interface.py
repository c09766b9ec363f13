"""What the engine and the indexer need of an embedder, whoever runs the model.

Two implementations: `EmbedderClient` (the gRPC service, the production topology: one model
process shared by the API and every indexer) and `LocalEmbedder` (the model in this process:
`semsearch.connect`, the in-process test tiers). Both answer the same four questions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np


class ModelInfo(Protocol):
    @property
    def model_id(self) -> str: ...
    @property
    def dimension(self) -> int: ...
    @property
    def max_sequence_length(self) -> int: ...
    @property
    def quantisation(self) -> str: ...
    @property
    def measured_chunks_per_second(self) -> float: ...
    @property
    def cpu(self) -> str: ...


class Embedder(Protocol):
    address: str  # where it runs, for status lines ("in-process" for the local one)
    retry_for_s: float  # how long a call waits out an embedder restart

    def info(self) -> ModelInfo: ...
    def count_tokens(self, texts: list[str]) -> list[int]: ...
    def embed(self, texts: list[str], query: bool = False) -> np.ndarray: ...
    def embed_query(self, text: str) -> tuple[np.ndarray, str]: ...
    def start_query(self, text: str) -> Callable[[], tuple[np.ndarray, str]]:
        """`embed_query`, begun: the returned call waits for its answer. The gRPC client sends the
        request at once, so a search does other work (its BM25 arm) while the model runs."""
        ...

    def close(self) -> None: ...
