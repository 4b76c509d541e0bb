"""Simulator fidelity: how close the simulated user is to the released SAGE transcripts, and how hard it is to game.

Modules: :mod:`calibrate` (replay released dialogues through a simulator, agreement with the recorded
emotions; ``rlver calibrate``) and :mod:`calibrate_report` (its tables and HTML), :mod:`appraisal_fit`
(fits the learned appraisal's weights from released transcripts; ``rlver simulator fit``), :mod:`probes`
(the reward-hacking battery; ``rlver probe``). A separate product from :mod:`rlver.eval`, the benchmark
of agents: this package judges the simulator, eval judges the agent.
"""
