"""The embedding service: all-MiniLM-L6-v2 (int8 weights) on onnxruntime, over gRPC.

`client.py` is what other services import; it needs only grpcio, never onnxruntime.
"""
