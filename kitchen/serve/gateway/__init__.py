"""The agent gateway: one OpenAI-compatible front over the policy's sampling client, recording
every call per rollout address (kitchen.ports.agents.AgentGateway; docs/agents.md).

    open_gateway(policy=, version=, renderer=, context=, port=, host=) -> Gateway
    Gateway.client(address) / base_url(address) / set_policy(client, version) / take(address)
    Gateway.live_snapshots() / listen(port, host) / close()

FastAPI, uvicorn, httpx and openai are imported only when a gateway serves or hands out a client.
"""

from kitchen.serve.gateway.gateway import Gateway, open_gateway

__all__ = ["Gateway", "open_gateway"]
