"""search_tool: Search-R1, RL of a model that answers questions with a search tool, as
tinker-cookbook's search_tool.

Locally: SmolLM2-135M-Instruct on the bundled task (invented people and towns whose facts only
the bundled passages hold, so only a policy that searches earns reward), a BM25 index (bm25s)
over those passages. `--preset cookbook`: tinker-cookbook's run, Qwen3.5-4B through Tinker on
PeterJinGo/nq_hotpotqa_train, its Chroma collection wiki_embeddings as the retriever.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from cookbook.envs.search import BUNDLED, SearchEnvs, SearchSettings
from cookbook.recipes import SMOLLM2_RL
from cookbook.recipes.env_rl import EnvRL
from cookbook.recipes.episodes import episode_limits
from kitchen.workflows.reinforcement import RLConfig
from train_core.rl.types import RLDatasetFactory


class SearchToolConfig(RLConfig):
    defaults: ClassVar[dict[str, Any]] = {
        **SMOLLM2_RL,
        "max_tokens": 96,
    }
    dataset: str = Field(
        BUNDLED,
        description="Questions in Search-R1's row shape: bundled:search (answers only in its "
        "passages) | PeterJinGo/nq_hotpotqa_train | a local JSONL/parquet",
    )
    test_dataset: str | None = Field(
        BUNDLED, description="Held-out questions (split 'test'); None: no test set"
    )
    num_test_questions: int = Field(
        0, ge=0, description="Test questions evaluated every eval_every steps (0 = none)"
    )
    retriever: Literal["bm25", "chroma"] = Field(
        "bm25",
        description="bm25 (bm25s over --corpus, in-process) | chroma (a Chroma collection over "
        "HTTP: --chroma-host/--chroma-port/--chroma-collection; needs chromadb)",
    )
    corpus: str = Field(
        BUNDLED, description="bm25: the passages' dataset (rows with text or contents)"
    )
    corpus_split: str = Field("passages", description="bm25: the corpus dataset's split")
    chroma_host: str = Field("localhost", description="chroma: the server's host")
    chroma_port: int = Field(8000, ge=1, description="chroma: the server's port")
    chroma_collection: str = Field("wiki_embeddings", description="chroma: the collection")
    n_results: int = Field(3, ge=1, description="Passages the search tool returns per query")
    max_turns: int = Field(5, ge=1, description="Turns per episode (search calls + the answer)")
    format_coef: float = Field(
        0.1, ge=0, description="Reward lost by a final reply without one 'Answer:'"
    )
    max_trajectory_tokens: int = Field(
        32 * 1024, ge=1, description="End an episode whose next prompt + max_tokens exceeds this"
    )
    context_overflow_reward: float = Field(
        -0.1, description="Reward of an episode cut by max_tokens or max_trajectory_tokens"
    )

    @model_validator(mode="after")
    def _test_set(self) -> SearchToolConfig:
        if self.evaluation.every and (self.test_dataset is None or not self.num_test_questions):
            raise ValueError(
                f"eval_every {self.evaluation.every} needs test questions: test_dataset "
                f"{self.test_dataset}, num_test_questions {self.num_test_questions}"
            )
        return self


class SearchR1(EnvRL[SearchToolConfig]):
    """Search-R1: RL of a model answering questions with a search tool (BM25 or Chroma)."""

    name = "search_tool"

    def envs(self, cfg: SearchToolConfig) -> RLDatasetFactory:
        settings = SearchSettings(**episode_limits(cfg))
        chroma = {"collection": cfg.chroma_collection, "host": cfg.chroma_host,
                  "port": cfg.chroma_port}  # fmt: skip
        return SearchEnvs(
            cfg.groups_per_batch, cfg.group_size, cfg.dataset, cfg.test_dataset,
            cfg.num_test_questions, cfg.retriever, cfg.corpus, cfg.corpus_split, chroma,
            cfg.n_results, settings, cfg.seed,
        )  # fmt: skip
