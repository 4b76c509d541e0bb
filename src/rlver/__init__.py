"""rlver: reinforcement learning with verifiable emotion rewards.

Layers (a module imports only from its own layer or lower ones; tests/test_architecture.py checks it):

    errors, records, io, config            plain building blocks (and this root: the version)
    llm, models, embedding                 how we talk to any model; the tiny model
    profiles                               who the user is
    simulator                              the sentient user (LLM-backed, offline or replay)
    env                                    one dialogue: reset/step, think-then-say, rewards
    rollout, transcripts, testing          many dialogues at once; transcript files; test servers
    train | eval                           learning | measuring (never importing each other)
    integrations                           verl on Ray
    cli                                    the `rlver` command (and the demo, above train and eval)

docs/architecture.md draws the data paths.
"""

__version__ = "0.1.0"
