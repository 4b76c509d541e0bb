"""Many dialogues at once: the concurrent runner (:mod:`rlver.rollout.runner`). Its transcripts are
written and read by :mod:`rlver.transcripts`; tokenisation for training is :mod:`rlver.train.tokenize`."""
