"""verifiers_rl: RL on a verifiers 0.4 environment (`verifiers.v1`), through the run's agent gateway.

Each rollout is one episode of the env (cookbook/envs/verifiers_bridge.py): verifiers runs its
harness, interception and scoring as it does anywhere; its model calls go to the rollout's
gateway client under the name `policy`, and the episode's reward is what its `@vf.reward`s gave.
The gateway records the exact tokens, so an episode of several calls on one conversation trains
as one datum. The bundled env is reverse-text on generated strings
(cookbook/envs/verifiers_reverse_text.py); any installed verifiers taskset id can be named.
Sized for the embedded engine: SmolLM2-135M, 4 tasks of 4 episodes per step.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import Field, field_validator

from cookbook.envs.synthetic import SYNTHETIC_BATCHES
from cookbook.recipes import SMOLLM2_RL
from cookbook.recipes.env_rl import EnvRL
from kitchen.workflows.reinforcement.config import AgentRLConfig
from train_core.rl.types import RLDatasetFactory

# verifiers takes seconds to import: this module names the bundled ids and imports it only to run.
BUNDLED_TASKSET = "kitchen-reverse-text"  # cookbook/envs/verifiers_reverse_text.py
CHAT_HARNESS = "kitchen-chat"  # cookbook/envs/verifiers_bridge.py


class VerifiersRLConfig(AgentRLConfig):
    defaults: ClassVar[dict[str, Any]] = {
        **SMOLLM2_RL,
        "max_tokens": 64,
    }

    vf_env_id: str = Field(
        BUNDLED_TASKSET,
        description="The verifiers taskset id (an installed verifiers.v1 taskset package); "
        "default: the bundled reverse-text on generated strings",
    )
    vf_env_args: dict[str, Any] = Field(
        default_factory=dict,
        description='The taskset\'s config fields, e.g. {"turns": 2} for the bundled env (its seed is --seed)',
    )
    vf_harness_id: str = Field(
        CHAT_HARNESS,
        description="The verifiers harness playing the env's agent seat: kitchen-chat (a chat "
        "loop in this process) or an installed harness id (null and bash need uv)",
    )

    @field_validator("vf_env_id")
    @classmethod
    def _an_installed_taskset(cls, value: str) -> str:
        return _installed("taskset", value)

    @field_validator("vf_harness_id")
    @classmethod
    def _an_installed_harness(cls, value: str) -> str:
        return _installed("harness", value)


def _installed(kind: str, plugin_id: str) -> str:
    """`plugin_id` once verifiers can import it as a `kind` plugin; else ValueError in one line."""
    from verifiers.v1.utils import loaders

    import cookbook.envs.verifiers_bridge  # noqa: F401 (registers the bundled ids)

    try:
        {"taskset": loaders.taskset_class, "harness": loaders.harness_class}[kind](plugin_id)
    except (ImportError, TypeError, AttributeError, ValueError) as e:
        reason = " ".join(str(e).split()).split(". ")[0]
        raise ValueError(f"{plugin_id!r} is no installed verifiers {kind} ({reason})") from e
    return plugin_id


class VerifiersRL(EnvRL[VerifiersRLConfig]):
    """RL of a verifiers environment's agent, trained token for token."""

    name = "verifiers_rl"

    def envs(self, cfg: VerifiersRLConfig) -> RLDatasetFactory:
        from cookbook.envs.verifiers_bridge import VerifiersTasks

        return VerifiersTasks(
            cfg.vf_env_id,
            cfg.groups_per_batch,
            cfg.group_size,
            cfg.num_batches or SYNTHETIC_BATCHES,
            {"seed": cfg.seed, **cfg.vf_env_args}
            if cfg.vf_env_id == BUNDLED_TASKSET
            else cfg.vf_env_args,
            cfg.vf_harness_id,
            max_tokens=cfg.max_tokens,
            temperature=cfg.temperature,
        )
