"""A recall query is bounded like a note: at most AgentConfig.max_text_chars characters."""

from __future__ import annotations

import pytest

from titans_agent import AgentConfig, InvalidInputError, MemoryAgent


class CountingEmbedder:
    """The fake embedder, counting the texts it is asked to embed."""

    def __init__(self, inner) -> None:
        self.inner, self.texts = inner, 0
        self.name, self.dim, self.max_tokens = inner.name, inner.dim, inner.max_tokens
        self.tokenizer = getattr(inner, "tokenizer", None)

    def embed(self, texts):
        self.texts += len(texts)
        return self.inner.embed(texts)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.mark.backends
def test_a_query_longer_than_max_text_chars_is_refused_before_it_is_embedded(db_url, fake_embedder) -> None:
    embedder = CountingEmbedder(fake_embedder)
    with MemoryAgent.open(db_url, embedder=embedder, config=AgentConfig(max_text_chars=1000)) as agent:
        agent.remember("the staging port is 8443")
        assert agent.recall("p" * 1000, k=1) is not None  # at the limit: accepted
        before = embedder.texts
        with pytest.raises(InvalidInputError, match="query is 1,001 characters.*max_text_chars"):
            agent.recall("p" * 1001, k=1)
        assert embedder.texts == before
        assert agent.recall("staging port", k=1)[0].text == "the staging port is 8443"  # still serving
