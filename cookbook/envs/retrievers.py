"""Where search_tool's `search` looks things up: anything with `retrieve(queries, k)` (the
Retriever protocol) plugs in. Built in: `bm25` (the bm25s library over a list of passages,
in-process, offline) and `chroma` (a Chroma collection over HTTP, as tinker-cookbook's
search_tool queries its Wikipedia index; needs the `chromadb` package and a running server).

A retriever is made once per run (the search tool's lifetime is the run): building a BM25 index
or opening a Chroma connection per episode would cost more than the episodes."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol, runtime_checkable


@runtime_checkable
class Retriever(Protocol):
    """The `k` best passages for each query, best first (fewer when the index has fewer)."""

    async def retrieve(self, queries: Sequence[str], k: int) -> list[list[str]]: ...


class BM25Retriever:
    """Okapi BM25 over `passages` (bm25s; English stopwords dropped). Scoring runs in a thread:
    it is CPU work and the event loop has other rollouts to move."""

    def __init__(self, passages: Sequence[str]) -> None:
        import bm25s

        if not passages:
            raise ValueError("BM25Retriever needs at least one passage")
        self.passages = list(passages)
        self._bm25s = bm25s
        self.index = bm25s.BM25()
        self.index.index(self._tokens(self.passages), show_progress=False)

    def _tokens(self, texts: Sequence[str]) -> Any:
        return self._bm25s.tokenize(list(texts), stopwords="en", show_progress=False)

    def _retrieve(self, queries: Sequence[str], k: int) -> list[list[str]]:
        k = min(k, len(self.passages))
        docs_QK, scores_QK = self.index.retrieve(self._tokens(queries), k=k, show_progress=False)
        # A passage sharing no word with the query scores 0: it was not found, only listed.
        return [
            [self.passages[int(d)] for d, s in zip(docs_K, s_K, strict=True) if s > 0]
            for docs_K, s_K in zip(docs_QK, scores_QK, strict=True)
        ]

    async def retrieve(self, queries: Sequence[str], k: int) -> list[list[str]]:
        if not queries:
            return []
        return await asyncio.to_thread(self._retrieve, queries, k)


Embed = Callable[[list[str]], Awaitable[list[list[float]]]]


class ChromaRetriever:
    """A Chroma collection queried by `embed(queries)` (the model the collection was embedded
    with; tinker-cookbook's is gemini-embedding-001 at 768 dimensions), or by the collection's
    own embedding function when `embed` is None. `client` is an async Chroma client (default:
    `chromadb.AsyncHttpClient(host, port)`, made on first use)."""

    def __init__(
        self,
        collection: str,
        host: str = "localhost",
        port: int = 8000,
        embed: Embed | None = None,
        client: Any = None,
    ) -> None:
        self.collection, self.host, self.port, self.embed = collection, host, port, embed
        self.client = client

    async def _collection(self) -> Any:
        if self.client is None:
            try:
                import chromadb
            except ImportError:
                raise RuntimeError(
                    "retriever chroma needs the chromadb package (pip install chromadb)"
                ) from None
            self.client = await chromadb.AsyncHttpClient(host=self.host, port=self.port)
        return await self.client.get_collection(self.collection)

    async def retrieve(self, queries: Sequence[str], k: int) -> list[list[str]]:
        if not queries:
            return []
        collection = await self._collection()
        if self.embed is None:
            result = await collection.query(query_texts=list(queries), n_results=k)
        else:
            embeddings = await self.embed(list(queries))
            result = await collection.query(query_embeddings=embeddings, n_results=k)
        return [list(docs) for docs in (result.get("documents") or [])]
