"""The indexer: finds files, extracts text, chunks it, embeds it (gRPC) and writes it (REST)."""
