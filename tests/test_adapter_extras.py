"""The adapters' shared lazy loader and missing-extra error (titans_agent.adapters.extras)."""

from __future__ import annotations

import sys

import pytest
import titans_agent.adapters.langchain as lc
import titans_agent.adapters.mcp as mcp_adapter
from titans_agent.adapters.extras import AdapterImportError, lazy_exports

from titans_agent import TitansAgentError


def test_every_adapter_raises_the_one_error_class():
    assert lc.AdapterImportError is mcp_adapter.AdapterImportError is AdapterImportError
    assert issubclass(AdapterImportError, ImportError) and issubclass(AdapterImportError, TitansAgentError)


def test_a_name_is_imported_from_its_submodule_when_first_asked_for():
    get = lazy_exports("titans_agent.adapters.mcp", {"hit_dict": "tools"}, {"mcp"}, "hint")
    assert get("hit_dict").__module__ == "titans_agent.adapters.mcp.tools"
    with pytest.raises(AttributeError, match="module 'titans_agent.adapters.mcp' has no attribute 'nope'"):
        get("nope")


def test_a_missing_framework_names_the_pip_line(monkeypatch):
    pytest.importorskip("mcp")
    for name in [m for m in sys.modules if m.partition(".")[0] in ("mcp", "mcp_types")]:
        monkeypatch.setitem(sys.modules, name, None)  # `import mcp...` raises ImportError
    monkeypatch.delitem(sys.modules, "titans_agent.adapters.mcp.server", raising=False)
    with pytest.raises(AdapterImportError, match=r"pip install 'titans-agent\[mcp\]'") as info:
        mcp_adapter.create_server  # noqa: B018
    assert isinstance(info.value.__cause__, ImportError)


def test_another_import_failure_is_not_blamed_on_the_extra():
    get = lazy_exports("titans_agent.adapters.mcp", {"x": "no_such_module"}, {"mcp"}, "hint")
    with pytest.raises(ImportError) as info:
        get("x")
    assert not isinstance(info.value, AdapterImportError)
    assert info.value.name == "titans_agent.adapters.mcp.no_such_module"
