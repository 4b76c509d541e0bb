"""The Sentient Benchmark: run an agent against simulated users, score transcripts, report, judge.

Modules: :mod:`metrics` (score, success, failure, CIs, paired comparison), :mod:`config` and
:mod:`runner` (``rlver eval``), :mod:`runs` (a run loaded for scoring: episodes, metrics, judge results;
the transcripts themselves are read by :mod:`rlver.transcripts`),
:mod:`report` (self-contained HTML + Markdown), :mod:`judge` (LLM capability analysis).
"""
