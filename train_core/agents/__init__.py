"""Agents: programs holding an OpenAI client, trained from what the gateway recorded of their calls."""

from train_core.agents.records import CallLog, CallRecord

__all__ = ["CallLog", "CallRecord"]
