"""An occurrence is described once (:class:`titans_agent.rows.OccurrenceFields`): the table, the
export line, the unit a pipeline writes and the hits all follow it."""

from __future__ import annotations

import datetime as dt
from dataclasses import fields

import pytest
from sqlalchemy import inspect

from titans_agent.rows import OCCURRENCE_COLUMNS, OCCURRENCE_FIELDS, OccurrenceData, OccurrenceFields
from titans_agent.store import dump
from titans_agent.store.schema import Occurrence
from titans_agent.transfer_format import OccurrenceLine
from titans_agent.write import WriteUnit

# the export line names these columns otherwise: a record by its ref, a document by its source
LINE_NAMES = {"record": "record_id", "document": "document_id", "metadata": "meta"}


def test_the_occurrences_table_holds_exactly_the_described_columns() -> None:
    columns = {a.key for a in inspect(Occurrence).column_attrs}
    assert columns == {"id", "namespace_id", *OCCURRENCE_COLUMNS}
    assert set(OCCURRENCE_FIELDS) < set(OCCURRENCE_COLUMNS)
    assert dump.OCCURRENCE_COLUMNS == OCCURRENCE_COLUMNS


def test_the_export_line_names_every_occurrence_column() -> None:
    names = {LINE_NAMES.get(n, n) for n in OccurrenceLine.model_fields if n != "type"}
    assert names == set(OCCURRENCE_COLUMNS)


def test_a_write_unit_and_a_stored_occurrence_carry_the_described_fields() -> None:
    for cls in (WriteUnit, OccurrenceData):
        assert issubclass(cls, OccurrenceFields)
        assert [f.name for f in fields(cls)][: len(OCCURRENCE_FIELDS)] == list(OCCURRENCE_FIELDS)
    unit = WriteUnit(text="x", kind="note", source="s", meta={"a": 1}, embed_prefix="p: ")
    assert unit.place == OccurrenceFields(kind="note", source="s", meta={"a": 1})
    read = OccurrenceData(id=1, record_id=2, kind="note", meta=None, created_at=dt.datetime.now(dt.timezone.utc))  # type: ignore[arg-type]
    assert read.meta == {}  # a NULL metadata column reads as no metadata


@pytest.mark.backends()
def test_records_and_recall_make_the_same_hit_of_an_occurrence(agent) -> None:
    agent.add_turn("s1", "user", "The staging server listens on port 8443.", "2025-03-01T09:00:00Z", metadata={"t": 1})
    agent.remember("The staging server listens on port 8443.", source="ops", metadata={"n": 2})
    listed = agent.records()
    found = agent.recall("staging server port", k=1)
    assert len(listed) == 2 and len(found) == 1
    first, hit = listed[0], found[0]
    assert hit.id == first.id and hit.kind == "turn" and hit.session_id == "s1"
    same = {"score", "signals"}
    assert hit.model_dump(exclude=same) == first.model_dump(exclude=same)
    assert (first.score, first.signals, first.occurrences, first.sources) == (0.0, {}, 2, ["ops"])
    assert hit.occurrences == 2 and hit.sources == ["ops"] and hit.signals and hit.score > 0


@pytest.mark.backends
def test_records_count_every_occurrence_of_a_record_as_recall_does(agent):
    """A record written in three places: each of its rows in ``records()`` says so, with the
    other sources, exactly as its recall hit does."""
    agent.add_turn("s1", "user", "The staging server listens on port 8443.")
    agent.remember("The staging server listens on port 8443.", source="dup")
    agent.add_turn("s2", "user", "The staging server listens on port 8443.")
    listed = agent.records()
    assert len(listed) == 3 and len({h.id for h in listed}) == 1
    hit = agent.recall("staging server port", k=1)[0]
    for row in listed:
        assert row.occurrences == hit.occurrences == 3
        assert sorted(row.sources) == sorted((set(hit.sources) | {hit.source}) - {row.source})
