"""What the commands share on the way in: the group's settings, the ``--json`` and ``--quiet``
options, and the checks of arguments (names, ``KEY=VALUE`` metadata, text or ``-`` for stdin)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

import click

from titans_agent import EmptyInputError, InvalidInputError

__all__ = ["json_option", "meta_option", "name_arg", "parse_meta", "pass_settings", "quiet_option", "read_text"]

#: Passes the group's settings (``titans_agent.cli.app._Settings``, the context object) first.
pass_settings = click.pass_obj
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
quiet_option = click.option("-q", "--quiet", is_flag=True, help="No progress bar.")


def read_text(text: str, what: str) -> str:
    """The argument itself, or standard input when it is ``-``.

    Raises:
        EmptyInputError: the text is blank (checked here so no model is loaded for nothing).
    """
    if text == "-":
        text = sys.stdin.read()
    if not text.strip():
        raise EmptyInputError(f"{what} is empty or only whitespace")
    return text


def parse_meta(_ctx: click.Context, _param: click.Parameter, values: Sequence[str]) -> dict[str, Any]:
    """Callback of ``--meta KEY=VALUE`` (repeatable): the pairs as a dict. A value written exactly
    as JSON writes a number, ``true``, ``false`` or ``null`` (``year=2021``, ``privileged=true``) is
    stored as that, so filters such as ``{"year": {"$gte": 2020}}`` match it; anything else
    (``zip=01234``, ``version=1.10``, ``court=NY``, ``score=NaN``, ``peak=Infinity``) is a string."""
    meta: dict[str, Any] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE")
        if key.strip() in meta:  # the last one silently winning would drop what the user typed first
            raise click.BadParameter(f"{key.strip()!r} is given twice")
        meta[key.strip()] = _typed(value)
    return meta


def meta_option(kept_with: str) -> Any:
    """The ``--meta KEY=VALUE`` option (repeatable, into the ``metadata`` parameter), its help
    naming what the metadata is ``kept_with``."""
    return click.option(
        "--meta",
        "metadata",
        multiple=True,
        metavar="KEY=VALUE",
        callback=parse_meta,
        help=f"Metadata kept with {kept_with} (repeatable; numbers, true, false, null typed).",
    )


def _typed(value: str) -> Any:
    try:  # NaN, Infinity, -Infinity: Python's json reads them, but they are not JSON numbers
        parsed = json.loads(value, parse_constant=_not_json)
    except ValueError:
        return value
    scalar = parsed is None or isinstance(parsed, (bool, int, float))
    return parsed if scalar and json.dumps(parsed) == value else value


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number")


def name_arg(_ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """Check a session id, role or source given on the command line (see ``check_name``): on POSIX
    an argument that is not valid UTF-8 arrives with lone surrogates, which cannot be stored."""
    if value is None:
        return None
    from titans_agent import check_name

    try:
        return check_name(value, param.human_readable_name)
    except InvalidInputError as exc:
        raise click.BadParameter(str(exc)) from None
