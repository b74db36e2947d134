"""The size limit on metadata: one object, serialised as JSON, at most MAX_METADATA_BYTES."""

from __future__ import annotations

import pytest

from titans_agent import InvalidInputError
from titans_agent.validation import MAX_METADATA_BYTES, check_metadata


def test_metadata_larger_than_the_limit_is_refused() -> None:
    frame = len('{"blob": ""}')
    assert check_metadata({"blob": "a" * (MAX_METADATA_BYTES - frame)})  # exactly at the limit
    with pytest.raises(InvalidInputError, match="over the limit of 1,048,576"):
        check_metadata({"blob": "a" * (MAX_METADATA_BYTES - frame + 1)})
    # bytes, not characters: two-byte characters reach the limit at half the count
    with pytest.raises(InvalidInputError, match="MAX_METADATA_BYTES"):
        check_metadata({"blob": "é" * (MAX_METADATA_BYTES // 2)})


@pytest.mark.backends
def test_remember_and_turns_refuse_huge_metadata_and_store_nothing(agent) -> None:
    blob = {"blob": "a" * (MAX_METADATA_BYTES + 1)}
    with pytest.raises(InvalidInputError, match="metadata is"):
        agent.remember("tiny note", metadata=blob)
    with pytest.raises(InvalidInputError, match="metadata is"):
        agent.add_turn("s1", "user", "hello there", metadata=blob)
    assert agent.records() == []
