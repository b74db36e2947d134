"""What every adapter shares: the error of a missing extra and the lazy loader of its names.

An adapter package (``titans_agent.adapters.langchain``, ``titans_agent.adapters.mcp``) imports its
framework only when one of its names is first used (a module ``__getattr__`` made by
:func:`lazy_exports`), so ``import titans_agent`` and ``import titans_agent.adapters.<name>`` never
import the framework; when the framework is missing, using a name raises
:class:`AdapterImportError` with the pip line of the extra.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Collection, Mapping
from typing import Any

from titans_agent import TitansAgentError

__all__ = ["AdapterImportError", "lazy_exports"]


class AdapterImportError(TitansAgentError, ImportError):
    """The adapter's extra is not installed (the message names the pip line)."""


def lazy_exports(
    package: str, exports: Mapping[str, str], frameworks: Collection[str], hint: str
) -> Callable[[str], Any]:
    """A module ``__getattr__`` for the adapter ``package``: name ``n`` of ``exports`` (name ->
    submodule of ``package``) is imported from ``package.<exports[n]>`` when first asked for.

    Args:
        package: the adapter's dotted package name, e.g. ``"titans_agent.adapters.mcp"``.
        exports: the lazily imported names, each with the submodule that defines it.
        frameworks: the top-level modules the extra installs (``{"mcp", "mcp_types"}``).
        hint: the message naming the pip line.

    Returns:
        The ``__getattr__``, which raises AttributeError for a name not in ``exports``,
        :class:`AdapterImportError` (``hint``) when the submodule fails to import because a module
        of ``frameworks`` is missing, and any other ImportError as it is.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module '{package}' has no attribute {name!r}")
        try:
            mod = importlib.import_module(f"{package}.{module}")
        except ImportError as exc:
            if exc.name and exc.name.split(".")[0] in frameworks:
                raise AdapterImportError(hint) from exc
            raise
        return getattr(mod, name)

    return __getattr__
