"""``titans_agent.parse_chat_line``: one JSON Lines chat turn (what ``titans-agent import-chat`` reads)."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from titans_agent import InvalidInputError, parse_chat_line


def test_a_good_line_gives_session_role_content_and_timestamp():
    line = json.dumps(
        {"session_id": "s1", "role": "user", "content": "Call me Dana.", "timestamp": "2024-05-01T10:00Z"}
    )
    assert parse_chat_line(line) == ("s1", "user", "Call me Dana.", "2024-05-01T10:00Z")


def test_alternative_field_names_and_no_timestamp():
    assert parse_chat_line('{"session": "s2", "role": "assistant", "text": "Noted."}') == (
        "s2",
        "assistant",
        "Noted.",
        None,
    )
    # a null field counts as missing, so the alternative name is used
    line = '{"session_id": null, "session": "s3", "role": "user", "content": null, "text": "hi", "timestamp": null}'
    assert parse_chat_line(line) == ("s3", "user", "hi", None)


def test_a_numeric_session_id_becomes_its_string():
    assert parse_chat_line('{"session_id": 42, "role": "user", "content": "hi"}')[0] == "42"


def test_a_numeric_timestamp_is_unix_seconds_in_utc():
    _, _, _, ts = parse_chat_line('{"session_id": "s", "role": "user", "content": "hi", "timestamp": 1714557600}')
    assert ts == dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.timezone.utc)
    _, _, _, ts = parse_chat_line('{"session_id": "s", "role": "user", "content": "hi", "timestamp": 1714557600.5}')
    assert ts == dt.datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("ts", ["1e300", "-1e300", "99999999999999999999"])
def test_an_out_of_range_timestamp_is_refused(ts):
    with pytest.raises(InvalidInputError, match=r"^timestamp .* is out of range$"):
        parse_chat_line(f'{{"session_id": "s", "role": "user", "content": "hi", "timestamp": {ts}}}')


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "not valid JSON (Expecting property name enclosed in double quotes at column 2)"),
        ("[" * 100_000 + "]" * 100_000, "JSON nested too deeply"),
        ('["s1", "user", "hi"]', "expected a JSON object, got list"),
        ('"just a string"', "expected a JSON object, got str"),
        ('{"role": "user", "content": "hi"}', "missing 'session_id' or 'session'"),
        ('{"session_id": "s", "content": "hi"}', "missing 'role'"),
        ('{"session_id": "s", "role": "user"}', "missing 'content' or 'text'"),
        ('{"session_id": true, "role": "user", "content": "hi"}', "session_id must be a string, got bool"),
        ('{"session_id": 1.5, "role": "user", "content": "hi"}', "session_id must be a string, got float"),
        ('{"session_id": "s", "role": 7, "content": "hi"}', "role must be a string, got int"),
        ('{"session_id": "s", "role": "user", "content": ["hi"]}', "content must be a string, got list"),
        (
            '{"session_id": "s", "role": "user", "content": "hi", "timestamp": true}',
            "timestamp must be an ISO 8601 string, got bool",
        ),
        (
            '{"session_id": "s", "role": "user", "content": "hi", "timestamp": {"at": 1}}',
            "timestamp must be an ISO 8601 string, got dict",
        ),
    ],
)
def test_each_bad_line_has_its_message(line, message):
    with pytest.raises(InvalidInputError) as info:
        parse_chat_line(line)
    assert str(info.value) == message
    assert isinstance(info.value, ValueError)  # InvalidInputError is a ValueError
