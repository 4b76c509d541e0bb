"""Transcripts, in both formats: reading, writing, repairing and auditing files of dialogues.

Modules: :mod:`native` (our JSONL: a manifest line, then one episode a line; resumable writer),
:mod:`published` (the SAGE ``*_result.jsonl`` format, in and out), :mod:`files` (find a run's
transcript, :func:`~rlver.transcripts.files.detect_format`, and
:func:`~rlver.transcripts.files.read_episodes` for either format), :mod:`audit` (re-derive every
emotion number). Same layer as :mod:`rlver.rollout`; import the submodules directly.
"""
