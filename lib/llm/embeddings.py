"""A client for any OpenAI-compatible /v1/embeddings endpoint, through the openai SDK (imported lazily).

A client: it turns texts into unit vectors and knows nothing of storage. Which embedder memory
uses, the local model and the embedding cache live in lib/memory/search/embeddings.py.
"""

from __future__ import annotations

import numpy as np

from lib.errors import EmbeddingError

TIMEOUT = 15.0
BATCH = 256
# A local server (OPENAI_BASE_URL) ignores the key, but the SDK refuses to start without one.
PLACEHOLDER_KEY = "not-needed"


class OpenAIEmbedder:
    """Embeds texts with one request per batch of at most BATCH texts."""

    def __init__(
        self,
        api_key: str | None,
        base_url: str | None,
        *,
        model: str,
        dimensions: int,
        timeout: float | None = None,
    ):
        self.model = model
        self.dimensions = dimensions
        self.timeout = timeout or TIMEOUT
        # OPENAI_BASE_URL is an origin (lib/config/environment.py drops a trailing /v1); the SDK wants the /v1.
        self._base_url = f"{base_url}/v1" if base_url else None
        self._api_key = api_key or (PLACEHOLDER_KEY if base_url else None)
        self._client = None

    def _get_client(self):
        if self._client is None:
            if not self._api_key:
                raise EmbeddingError(
                    "OPENAI_API_KEY is not set (needed by [embeddings] provider = 'openai'; "
                    "a local server named by OPENAI_BASE_URL needs none)"
                )
            import openai

            # Our own policy decides about retries (lib/retry.py); the SDK must not add its own.
            self._client = openai.OpenAI(
                api_key=self._api_key, base_url=self._base_url, max_retries=0, timeout=self.timeout
            )
        return self._client

    def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        """Unit vectors for `texts`, checked against the configured dimensions (queries and
        texts alike: the API has one encoding)."""
        import openai

        client = self._get_client()
        out = []
        for start in range(0, len(texts), BATCH):
            batch = texts[start : start + BATCH]
            try:
                response = client.embeddings.create(model=self.model, input=batch, dimensions=self.dimensions)
            except openai.OpenAIError as exc:
                raise EmbeddingError(f"embedding request to {self.model} failed: {exc}") from exc
            data = sorted(response.data, key=lambda d: d.index)
            vectors = np.array([d.embedding for d in data], dtype=np.float32)
            if vectors.shape != (len(batch), self.dimensions):
                raise EmbeddingError(
                    f"{self.model} returned vectors of shape {vectors.shape}, expected "
                    f"({len(batch)}, {self.dimensions}); set [embeddings] dimensions to the model's size"
                )
            out.append(vectors)
        stacked = np.concatenate(out)
        norms = np.linalg.norm(stacked, axis=1, keepdims=True)
        return (stacked / np.clip(norms, 1e-12, None)).astype(np.float32)
