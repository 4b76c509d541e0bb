"""Scale-out through verl on Ray: an agent loop, dataset/config builders and a launcher.

verl (Sheng et al., *HybridFlow*, 2024; the framework the published RLVER runs were built on) owns the
distributed parts: Ray placement, FSDP/Megatron training, vLLM/SGLang rollout servers, checkpointing.
rlver plugs into verl's extension point for multi-turn environments, the *agent loop*
(``verl.experimental.agent_loop.AgentLoopBase``), instead of forking the trainer:

* :mod:`.settings` — the per-dialogue settings carried in each dataset row (no verl import);
* :mod:`.agent_loop` — one dialogue with our simulator, token in / token out (imports verl);
* :mod:`.dataset` — profiles → a parquet verl's ``RLHFDataset`` reads;
* :mod:`.config` — our ``TrainConfig`` (+ a ``verl:`` section) → verl Hydra overrides;
* :mod:`.launch` — writes everything, prints the command and runs ``python -m verl.trainer.main_ppo``.

Only :mod:`.agent_loop` needs verl importable; the rest needs pandas/pyarrow (the ``verl`` extra).
"""

#: The name our agent loop is registered under (the ``agent_name`` column of every dataset row).
AGENT_NAME = "rlver_dialogue"
#: The dotted path verl's Hydra ``instantiate`` uses to build the loop in each Ray worker.
AGENT_LOOP_TARGET = "rlver.integrations.verl.agent_loop.RlverDialogueAgentLoop"
#: The ``data_source`` column: verl groups validation metrics by it.
DATA_SOURCE = "rlver"
