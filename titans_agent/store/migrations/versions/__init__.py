"""Alembic revisions of the titans-agent schema, one file each, append-only (never edit a released one)."""
