"""Mnemis recall as a LangChain retriever, inside an LCEL chain. Offline.

    python cookbook/langchain_retriever_chain.py

``MnemisRetriever`` returns one ``Document`` per memory node; its metadata says where the node
sits in the memory's hierarchy (``path``, ``path_str``) and how it was found (``score``,
``semantic_score``, ``relation_score``, ``via``, ``source_ids``, ``time``, ``status``). The chain
puts each memory into the prompt under its path, so the model sees the topic of every memory.

Offline by design: the "chat model" below is a scripted fake that quotes the first memory in its
prompt. Replace it with any LangChain chat model (e.g. ``ChatOpenAI(model=...)``), and drop
``embedder=`` to use the bundled multilingual e5 embedder.
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough

from mnemis_integrations import MnemisMemory
from mnemis_integrations.core.embedders import HashingEmbedder
from mnemis_integrations.langchain import MnemisRetriever

CONVERSATION = [
    {
        "id": "m1",
        "speaker": "user",
        "text": "My refund for order 42 timed out at the bank.",
        "timestamp": "2024-05-06T09:00:00Z",
    },
    {
        "id": "m2",
        "speaker": "assistant",
        "text": "I reopened the refund for order 42; expect it within five days.",
        "timestamp": "2024-05-06T09:01:00Z",
    },
    {
        "id": "m3",
        "speaker": "user",
        "text": "Please contact me by email, not by phone.",
        "timestamp": "2024-05-06T09:02:00Z",
    },
    {
        "id": "m4",
        "speaker": "user",
        "text": "My beagle Rex needs his vaccines at the vet next week.",
        "timestamp": "2024-05-08T17:30:00Z",
    },
    {
        "id": "m5",
        "speaker": "assistant",
        "text": "The Elm Street vet has vaccine slots on Friday morning.",
        "timestamp": "2024-05-08T17:31:00Z",
    },
    {
        "id": "m6",
        "speaker": "user",
        "text": "We are flying to Lisbon in June for my sister's birthday.",
        "timestamp": "2024-05-10T20:00:00Z",
    },
]


class QuoteFirstMemory(GenericFakeChatModel):
    """Stand-in for a real chat model: answers by quoting the first memory line of its prompt."""

    messages: Any = iter(())

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        memories = [line for m in messages for line in m.text.splitlines() if line.startswith("- [")]
        answer = f"From what you told me earlier: {memories[0][2:]}" if memories else "I don't remember that."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=answer))])


def format_docs(docs: list[Document]) -> str:
    """One ``- [A > B > C] text`` line per memory, best first."""
    return "\n".join(f"- [{d.metadata['path_str']}] {d.page_content.splitlines()[0]}" for d in docs)


def build(mem: MnemisMemory):
    retriever = MnemisRetriever(memory=mem, namespace="u1", k=3)
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "You are a support agent. What you remember about this user:\n{memories}"),
            ("human", "{question}"),
        ]
    )
    chain = (
        {"memories": retriever | RunnableLambda(format_docs), "question": RunnablePassthrough()}
        | prompt
        | QuoteFirstMemory()
        | StrOutputParser()
    )
    return retriever, chain


def run() -> dict[str, Any]:
    mem = MnemisMemory(embedder=HashingEmbedder())  # MnemisMemory(path="memory.db") keeps it on disk
    mem.add_messages(CONVERSATION, namespace="u1")
    retriever, chain = build(mem)

    question = "Any news on the refund for order 42?"
    docs = retriever.invoke(question)
    print(f"Q: {question}\nRecall ({len(docs)} memories, best first):")
    for d in docs:
        md = d.metadata
        print(f"  [{md['path_str']}]  score={md['score']:.2f} via={'+'.join(md['via'])} kind={md['kind']}")
        print(f"      {d.page_content.splitlines()[0]}")

    answer = chain.invoke(question)
    print(f"Chain answer: {answer}")

    later = retriever.invoke("when is the vet appointment for Rex", k=1)[0]
    print(f"Per-call k=1: [{later.metadata['path_str']}] sources={later.metadata['source_ids']}")
    return {"docs": docs, "answer": answer, "later": later}


if __name__ == "__main__":
    run()
