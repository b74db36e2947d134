"""Retrieval-augmented answering with TitansRetriever in an LCEL chain, offline.

Ingests the Python standard library's ``json`` package into a temporary memory database (real
default embedder), then answers a question with the chain

    {"context": retriever | format_docs, "question": RunnablePassthrough()} | prompt | model | parser

The model is LangChain's fake chat model (it answers with the retrieved passage), or the chat model
named by the environment variable TITANS_AGENT_CHAT_MODEL (e.g. "openai:gpt-4o-mini"), loaded with
``init_chat_model``.

Run: python examples/rag_retriever.py ["your question"]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from titans_agent.adapters.langchain import TitansRetriever

from titans_agent import MemoryAgent

QUESTION = "How does the JSON decoder scan a string literal?"

PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer the question using only this context:\n\n{context}"),
        ("human", "{question}"),
    ]
)


def format_docs(docs: list[Document]) -> str:
    """Join retrieved documents into the prompt's context, each headed by its source and lines."""
    return "\n\n".join(f"[{d.metadata['source']}:{d.metadata['location']}]\n{d.page_content}" for d in docs)


class ContextEchoModel(GenericFakeChatModel):
    """The offline stand-in: answers with the first passage of the context in its prompt."""

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[override]
        context = messages[0].text.split("\n\n", 1)[-1]
        first = context.split("\n\n[", 1)[0]
        self.messages = iter([AIMessage(f"According to {first.strip()[:600]}")])
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


def make_model():
    """The chat model: ``init_chat_model($TITANS_AGENT_CHAT_MODEL)`` when set, else the offline fake."""
    name = os.environ.get("TITANS_AGENT_CHAT_MODEL")
    if name:
        from langchain.chat_models import init_chat_model

        return init_chat_model(name)
    return ContextEchoModel(messages=iter([]))


def main(question: str = QUESTION) -> None:
    folder = Path(json.__file__).parent
    with tempfile.TemporaryDirectory() as tmp, MemoryAgent.open(Path(tmp) / "memory.db") as agent:
        report = agent.ingest(folder)
        print(f"Ingested {folder} ({report.chunks} chunks)")
        retriever = TitansRetriever(agent=agent, k=3, kinds=["chunk"])
        chain = (
            {"context": retriever | RunnableLambda(format_docs), "question": RunnablePassthrough()}
            | PROMPT
            | make_model()
            | StrOutputParser()
        )
        print(f"Question: {question}")
        print("Sources:")
        for doc in retriever.invoke(question):
            source = Path(doc.metadata["source"])
            where = f"{source.parent.name}/{source.name} lines {doc.metadata['location']}"
            print(f"  {where}  score {doc.metadata['score']:.4f}")
        print(f"Answer: {chain.invoke(question)}")


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]) or QUESTION)
