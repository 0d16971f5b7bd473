"""The RL seam: every rollout stage rolls a group out through `rollout_group`. A classic env group
runs train_core's do_group_rollout as before; an agent group (AgentGroupBuilder) runs its agent's
own loop once per rollout on a client of the run's gateway (port "agents"), one address each, and
trains on what the gateway recorded. Dropped rollouts and groups are counted; `settle` fails the
step past the configured fraction."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kitchen.engine.errors import StageError
from kitchen.engine.stage import Context, Metrics
from train_core.agents.rollouts import AgentBudgets, AgentGroupBuilder, GroupOutcome

AGENTS_PORT = "agents"


@dataclass(frozen=True)
class AgentRollouts:
    """How a workflow rolls out agent groups: each rollout's budgets, and the fraction of a step's
    rollouts that may be dropped before the step fails."""

    budgets: AgentBudgets = field(default_factory=AgentBudgets)
    max_failed_fraction: float = 0.5
    over_http: bool = False
    """Hand rollouts an HTTP client on the gateway's port instead of its in-process one."""
    base_model: str | None = None
    """The model the policy's weights are of (the gateway's chat format follows it)."""


@dataclass(frozen=True)
class Seam:
    """The gateway agent groups sample through (None where the workflow has no agents) and where
    this batch's addresses start: group i's rollout j is f"{prefix}-{i}-{j}" (the gateway takes no "/" in an address)."""

    gateway: Any = None
    budgets: AgentBudgets = field(default_factory=AgentBudgets)
    prefix: str = ""
    over_http: bool = False

    @staticmethod
    def of(ctx: Context[Any], agents: AgentRollouts | None, prefix: str) -> Seam:
        """The seam of a stage with these `agents` options (none: classic groups only)."""
        return Seam() if agents is None else Seam.over(ctx.port(AGENTS_PORT), agents, prefix)

    @staticmethod
    def over(gateway: Any, agents: AgentRollouts, prefix: str) -> Seam:
        return Seam(gateway, agents.budgets, prefix, agents.over_http)

    def http_client(self, address: str) -> Any:
        """An `openai.AsyncOpenAI` on the gateway's HTTP port, addressed to `address`."""
        import openai

        url = self.gateway.base_url(address)
        if url is None:
            raise StageError(
                "agent rollouts over HTTP, but the agent gateway listens on no port "
                "(set agent_gateway_port, or agent_transport in_process)"
            )
        return openai.AsyncOpenAI(base_url=url, api_key="kitchen", max_retries=0)


async def rollout_group(builder: Any, policy: Any, i: int, seam: Seam) -> GroupOutcome:
    """Group `i` of a batch, classic or agent."""
    if isinstance(builder, AgentGroupBuilder):
        from train_core.agents.rollouts import do_agent_group_rollout

        if seam.gateway is None:
            raise StageError(
                f"group {i} is an agent group, but this rollout stage has no agent gateway "
                "(build the workflow with agents=AgentRollouts(...))"
            )
        where = f"{seam.prefix}-{i}" if seam.prefix else str(i)
        client_for = seam.http_client if seam.over_http else None
        return await do_agent_group_rollout(builder, seam.gateway, where, seam.budgets, client_for)
    from train_core.rl import do_group_rollout

    group = await do_group_rollout(builder, policy)
    return GroupOutcome(group, len(group.trajectories_G))


def settle(
    builders_P: list[Any], outcomes_P: list[GroupOutcome], agents: AgentRollouts | None
) -> tuple[list[Any], list[Any], Metrics]:
    """(builders, groups) of the groups kept and the `agents/*` metrics; raises the step's one
    failure line when more rollouts were dropped than `agents` allows, or when no group is left."""
    from train_core.agents.rollouts import agent_metrics, failure_line

    limit = agents.max_failed_fraction if agents is not None else 0.0
    line = failure_line(outcomes_P, limit)
    if line is not None:
        raise StageError(line)
    kept = [
        (b, o.group) for b, o in zip(builders_P, outcomes_P, strict=True) if o.group is not None
    ]
    if not kept and outcomes_P:
        dropped = [f for o in outcomes_P for f in o.failures]
        first = f"; first: {dropped[0].line()}" if dropped else ""
        raise StageError(f"every agent group of the step was dropped{first}")
    return [b for b, _ in kept], [g for _, g in kept], agent_metrics(outcomes_P)


@dataclass(frozen=True, kw_only=True)
class SetAgentPolicy:
    """The gateway's `policy` now samples with this step's sampler (and releases the snapshots no
    rollout holds); the weights are of `base_model` (the run's model)."""

    base_model: str | None = None
    name: str = "set_agent_policy"
    reads: frozenset[str] = frozenset({"sampling_client", "policy_version"})
    writes: frozenset[str] = frozenset()
    ports: frozenset[str] = frozenset({AGENTS_PORT})

    def __call__(self, ctx: Context[Any]) -> Metrics | None:
        gateway = ctx.port(AGENTS_PORT)
        gateway.set_policy(ctx.state.sampling_client, ctx.state.policy_version, self.base_model)
        return {"agents/live_snapshots": float(gateway.live_snapshots())}
