"""Memory: canonical rows (`store.py`), indexing and retrieval, embeddings, extraction."""
