"""The Sentient Benchmark: run an agent against simulated users, score transcripts, report, judge.

Modules: :mod:`metrics` (score, success, failure, CIs, paired comparison), :mod:`config` and
:mod:`runner` (``rlver eval``), :mod:`sources` (read our transcripts and the published result format),
:mod:`report` (self-contained HTML + Markdown), :mod:`judge` (LLM capability analysis).
"""
