"""Wire contracts: the embedder's gRPC stubs (generated at install) live here."""
