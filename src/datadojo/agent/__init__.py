"""The agent runtime: concurrent resumable rollouts (:func:`run_rollouts`) over the environment's ReAct driver.

The episode itself — the prompt, the turn, the driver :func:`run_agent` and the settings :class:`AgentConfig`
— lives in :mod:`datadojo.env` (issue 37); they are re-exported here because ``from datadojo.agent import
AgentConfig, run_agent`` is how scripts, benchmarks and the docs have always imported them.
"""

from datadojo.agent.runner import RolloutSummary, finished_keys, run_rollouts
from datadojo.env import AgentConfig, AgentEvent, CodeRunner, run_agent

__all__ = [
    "AgentConfig",
    "AgentEvent",
    "CodeRunner",
    "RolloutSummary",
    "finished_keys",
    "run_agent",
    "run_rollouts",
]
