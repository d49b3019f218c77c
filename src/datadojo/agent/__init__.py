"""The agent runtime: the ReAct loop (:func:`run_agent`) and concurrent resumable rollouts (:func:`run_rollouts`)."""

from datadojo.agent.config import AgentConfig
from datadojo.agent.loop import AgentEvent, CodeRunner, run_agent
from datadojo.agent.runner import RolloutSummary, finished_keys, run_rollouts

__all__ = [
    "AgentConfig",
    "AgentEvent",
    "CodeRunner",
    "RolloutSummary",
    "finished_keys",
    "run_agent",
    "run_rollouts",
]
