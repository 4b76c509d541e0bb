"""One dialogue as an environment: reset/step, think-then-say, and reward functions."""

from rlver.env.dialogue import DialogueEnv, EnvConfig, StepResult
from rlver.env.rewards import RewardSpec, episode_reward, turn_rewards
from rlver.env.thinking import ThinkSplit, split_think, system_prompt

__all__ = [
    "DialogueEnv",
    "EnvConfig",
    "RewardSpec",
    "StepResult",
    "ThinkSplit",
    "episode_reward",
    "split_think",
    "system_prompt",
    "turn_rewards",
]
