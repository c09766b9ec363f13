"""The indexer: finds files, extracts text, chunks it, embeds it and writes it — through the REST API and the
gRPC embedder in its own process, or straight into the engine in one process (`semsearch.connect`)."""
