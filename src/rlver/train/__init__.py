"""Single-machine RL training (PPO with a critic, GRPO) on whole multi-turn dialogues.

Start reading at :meth:`rlver.train.trainer.Trainer.train_step`; the maths live in
:mod:`rlver.train.algorithms`. See docs/training.md.
"""
