"""rlver: reinforcement learning with verifiable emotion rewards.

Layers (imports only flow downwards):

    errors, io, records, config            plain building blocks
    profiles, llm, models                  who the user is; how we talk to any model
    simulator                              the sentient user (LLM-backed or offline)
    env                                    one dialogue: reset/step, think-then-say, rewards
    rollout                                many dialogues at once; transcripts
    train, eval, integrations              learning and measuring
    cli                                    the `rlver` command
"""

__version__ = "0.1.0"
