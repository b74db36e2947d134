"""TitansRetriever: langchain-tests' standard retriever suite, metadata, namespace isolation, async."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from conftest import FakeEmbedder
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests
from titans_agent.adapters.langchain import TitansRetriever

from titans_agent import MemoryAgent

NOTES = [
    "The staging server listens on port 8443.",
    "The production server listens on port 443 behind the load balancer.",
    "The backup server copies the database every night at 02:00.",
    "The build server runs the test suite on every push.",
    "Alice prefers tea over coffee in the morning.",
]


@pytest.fixture(scope="module")
def shared_agent():
    """One populated MemoryAgent for the standard suite (its constructor params are not fixtures)."""
    folder = tempfile.mkdtemp(prefix="titans-retriever-")
    agent = MemoryAgent.open(Path(folder) / "memory.db", embedder=FakeEmbedder())
    for note in NOTES:
        agent.remember(note, {"topic": "ops"})
    yield agent
    agent.close()
    shutil.rmtree(folder, ignore_errors=True)


# strict asyncio mode: the suite's async test needs the mark; its sync tests ignore it (and warn)
@pytest.mark.asyncio
@pytest.mark.filterwarnings("ignore:The test <Function test_.*asyncio:pytest.PytestWarning")
class TestTitansRetrieverStandard(RetrieversIntegrationTests):
    @pytest.fixture(autouse=True)
    def _bind_agent(self, shared_agent):
        self._agent = shared_agent

    @property
    def retriever_constructor(self) -> type[TitansRetriever]:
        return TitansRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"agent": self._agent, "k": 2}

    @property
    def retriever_query_example(self) -> str:
        return "which server listens on which port?"


def test_documents_carry_provenance_and_caller_metadata(agent, tmp_path):
    doc = tmp_path / "notes.md"
    doc.write_text("# Servers\n\nThe staging server listens on port 8443.\n", encoding="utf-8")
    agent.ingest(doc)
    agent.remember("Release day is Thursday.", {"team": "core", "score": "caller-value"}, source="crm")
    retriever = TitansRetriever(agent=agent, k=5)

    docs = retriever.invoke("staging server port")
    chunk = next(d for d in docs if "8443" in d.page_content)
    assert chunk.metadata["kind"] == "chunk"
    assert chunk.metadata["source"].endswith("notes.md")
    assert chunk.metadata["start_line"] >= 1 and chunk.metadata["end_line"] >= chunk.metadata["start_line"]
    assert chunk.metadata["location"] == f"{chunk.metadata['start_line']}-{chunk.metadata['end_line']}"
    assert isinstance(chunk.metadata["score"], float) and chunk.metadata["score"] > 0
    assert chunk.metadata["surprise"] is not None
    assert chunk.id == str(chunk.metadata["record_id"])

    note = TitansRetriever(agent=agent, k=5, kinds=["note"]).invoke("release day")
    assert [d.page_content for d in note] == ["Release day is Thursday."]
    meta = note[0].metadata
    assert meta["team"] == "core" and meta["source"] == "crm" and meta["kind"] == "note"
    assert isinstance(meta["score"], float), "caller metadata must not clobber the retriever's keys"


@pytest.mark.backends()
def test_tenant_isolation_c2(agent):
    agent.remember("Project Alder invoice total is 1,200 EUR", namespace="tenant_a")
    agent.remember("Project Birch invoice total is 900 EUR", namespace="tenant_b")
    docs = TitansRetriever(agent=agent, namespace="tenant_b", k=50).invoke("invoice total")
    assert [d.page_content for d in docs] == ["Project Birch invoice total is 900 EUR"]
    # the per-call override is isolated too
    docs = TitansRetriever(agent=agent).invoke("invoice total", namespace="tenant_a", k=50)
    assert [d.page_content for d in docs] == ["Project Alder invoice total is 1,200 EUR"]


@pytest.mark.parametrize(
    ("mine", "sibling"),
    [("org/lumen", "org/lumen-labs"), ("user1", "user10"), ("a%", "ab"), ("a_", "ab")],
)
@pytest.mark.backends()
def test_look_alike_namespaces_c3(agent, mine, sibling):
    agent.remember(f"Secret of {sibling}: the vault code is 4711.", namespace=sibling)
    agent.remember(f"Note of {mine}: the vault code is 1234.", namespace=mine)
    docs = TitansRetriever(agent=agent, namespace=mine, k=50).invoke("vault code")
    assert [d.page_content for d in docs] == [f"Note of {mine}: the vault code is 1234."]


@pytest.mark.backends()
def test_a_namespace_not_written_yet_retrieves_nothing(agent):
    """A new user's namespace does not exist until their first write: the retriever answers empty
    (MemoryAgent.recall alone would raise NamespaceNotFoundError) and creates nothing."""
    agent.remember("Project Alder invoice total is 1,200 EUR", namespace="tenant_a")
    assert TitansRetriever(agent=agent, namespace="new-user").invoke("invoice total") == []
    assert TitansRetriever(agent=agent).invoke("invoice total", namespace="new-user") == []
    assert agent.namespaces() == ["tenant_a"]


@pytest.mark.backends()
def test_session_filter_and_blank_query(agent):
    agent.add_turns([("s1", "user", "my dog is called Rex"), ("s1_old", "user", "my dog is called Max")])
    docs = TitansRetriever(agent=agent, session_id="s1", k=10).invoke("dog name")
    assert [d.page_content for d in docs] == ["my dog is called Rex"]
    assert docs[0].metadata["session_id"] == "s1" and docs[0].metadata["role"] == "user"
    assert TitansRetriever(agent=agent).invoke("   ") == []


@pytest.mark.backends()
@pytest.mark.asyncio
async def test_ainvoke_matches_invoke(agent):
    for note in NOTES:
        agent.remember(note)
    retriever = TitansRetriever(agent=agent, k=3)
    sync_docs = retriever.invoke("server port")
    async_docs = await retriever.ainvoke("server port", k=3)
    assert all(isinstance(d, Document) for d in async_docs)
    assert [d.id for d in async_docs] == [d.id for d in sync_docs]
    assert len(await retriever.ainvoke("server port", k=1)) == 1


@pytest.mark.slow
def test_import_titans_agent_does_not_import_langchain():
    code = (
        "import titans_agent, sys; "
        "bad = [m for m in sys.modules if m.startswith(('langchain', 'langgraph'))]; "
        "assert not bad, bad"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.integration
def test_rag_retriever_example_runs_offline():
    script = Path(__file__).resolve().parents[1] / "examples" / "rag_retriever.py"
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "json/decoder.py lines" in proc.stdout or "json/scanner.py lines" in proc.stdout
    assert "Answer:" in proc.stdout


@pytest.mark.slow
def test_adapter_without_the_extra_names_the_pip_line(tmp_path):
    """With LangChain missing, using the adapter raises an ImportError naming the pip line."""
    code = (
        "import sys\n"
        "for name in ('langchain_core', 'langchain', 'langgraph'):\n"
        "    sys.modules[name] = None  # as if not installed\n"
        "import titans_agent.adapters.langchain as lc\n"
        "try:\n"
        "    lc.TitansRetriever\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert 'pip install "titans-agent[langchain]"' in proc.stdout
