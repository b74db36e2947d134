"""``parse_chat_line`` (one JSON Lines chat turn) and ``read_chat`` (a whole file, what ``titans-agent
import-chat`` reads)."""

from __future__ import annotations

import datetime as dt
import io
import json

import pytest

from titans_agent import InvalidInputError, read_chat
from titans_agent.ingest.chat import parse_chat_line


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


# ---------------------------------------------------------------------- a whole file: read_chat
CHAT = [
    b'{"session_id": "s1", "role": "user", "content": "Please call me Dana.", "timestamp": 1714557600}',
    b'{"session_id": "s1", "role": "user", "content": "\xe2\x80\x8b"}',  # only a zero-width space
    b'{"session_id": "s1", "role": " ", "content": "a blank role"}',
    b'{"session_id": "s1", "role": "user", "content": "bad time", "timestamp": "yesterday"}',
    b'{"session_id": "s1", "role": "user", "content": "' + b"x" * 60 + b'"}',
    b'{"session_id": "s1", "role": "user", "content": "caf\xe9"}',
    b"   ",
    b'{"session": "s1", "role": "assistant", "text": "Noted, Dana."}',
]


def test_read_chat_skips_each_line_add_turns_would_refuse_and_keeps_the_rest(agent, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"\r\n".join(CHAT) + b"\r\n")
    log = read_chat(path, max_text_chars=50)
    assert log.lines == [1, 8]
    assert [(t.session_id, t.role, t.content) for t in log.turns] == [
        ("s1", "user", "Please call me Dana."), ("s1", "assistant", "Noted, Dana."),
    ]  # fmt: skip
    reasons = dict(log.skipped)
    assert sorted(reasons) == [2, 3, 4, 5, 6]
    assert reasons[2] == "content is empty or only whitespace" and "role" in reasons[3]
    assert "ISO 8601" in reasons[4] and "over the limit of 50" in reasons[5] and reasons[6] == "not UTF-8"
    results = agent.add_turns(log.turns)  # the batch is never refused for one bad line
    assert [r.turn_seq for r in results] == [1, 2]
    with path.open("rb") as f:
        assert read_chat(f, max_text_chars=50) == log == read_chat(path.read_bytes(), max_text_chars=50)
    assert len(read_chat(path).turns) == 3  # the default limit is AgentConfig's


def test_read_chat_refuses_what_is_not_a_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_chat(tmp_path / "nope.jsonl")
    with pytest.raises(InvalidInputError, match="binary file"):
        read_chat(io.StringIO('{"session_id": "s", "role": "u", "content": "hi"}'))
    with pytest.raises(InvalidInputError, match="got int"):
        read_chat(5)  # type: ignore[arg-type]


def test_import_chat_skips_a_turn_of_only_a_zero_width_space(tmp_path, monkeypatch, fake_embedder):
    from click.testing import CliRunner
    from titans_agent.cli import app as cli_app

    from titans_agent import AgentConfig, MemoryAgent

    monkeypatch.setattr(
        cli_app,
        "open_agent",
        lambda db, *_a, **_k: MemoryAgent.open(db, AgentConfig(device="cpu"), embedder=fake_embedder),
    )
    path = tmp_path / "chat.jsonl"
    path.write_bytes(b"\n".join(CHAT))
    result = CliRunner().invoke(cli_app.cli, ["--db", str(tmp_path / "m.db"), "import-chat", str(path), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["turns"] == 3 and [s["line"] for s in out["skipped"]] == [2, 3, 4, 6]
    assert out["skipped"][0] == {"line": 2, "reason": "content is empty or only whitespace"}
