"""Many dialogues at once: the concurrent runner, transcripts (ours and the published format), audit,
and tokenisation for training. Import the submodules directly (``rlver.rollout.runner`` ...)."""
