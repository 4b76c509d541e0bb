"""Our verl agent loop, built exactly as verl's AgentLoopWorker builds it (Hydra ``instantiate`` of the
entry in the generated agent-loop YAML, verl's Continuous Token builder, rows from verl's RLHFDataset),
driven by a server manager that answers with tokens from the tiny model.

Checked: masks (assistant tokens 1, user turns 0, ends on an assistant turn), that the trained tokens
are exactly the sampled ones, termination (turn limit, emotion, the user leaving), the reward (our
``episode_reward`` of the logged episode), the extra fields, think stripping before the simulated user,
and the shared simulator concurrency limit. Skipped cleanly without the ``verl`` extra.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("verl")

import hydra
import torch
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, DictConfigWrap, ToolListWrap
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

from rlver.env.rewards import RewardSpec, episode_reward, turn_rewards
from rlver.integrations.verl.agent_loop import SIMULATOR_GATE, DialogueFailed, RlverDialogueAgentLoop
from rlver.integrations.verl.launch import compose_verl_config, load_verl_config, prepare
from rlver.models.tiny import tiny_model_and_tokenizer
from rlver.records import Episode
from rlver.testing.openai_server import FakeChatServer

SECRET = "SECRET-PLAN"


class TinyModelServer:
    """verl's server-manager contract (``generate(request_id, *, prompt_ids, sampling_params)`` →
    ``TokenOutput``), answered by the tiny model; ``think`` prefixes each reply with a think block.

    ``truncate``: like vLLM at ``max_tokens``: every reply runs to ``max_tokens`` (end tokens are
    suppressed) and no end token is added."""

    def __init__(self, model: Any, tokenizer: Any, *, think: bool = False, truncate: bool = False) -> None:
        self.model, self.tokenizer, self.think, self.truncate = model, tokenizer, think, truncate
        self.replies: list[list[int]] = []
        self.prompts: list[list[int]] = []
        self.im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")

    async def generate(
        self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **_: Any
    ):
        self.prompts.append(list(prompt_ids))
        budget = int(sampling_params["max_tokens"])
        prefix = self.tokenizer.encode(f"<think>{SECRET} {len(self.replies)}</think>") if self.think else []
        prefix = prefix[: max(0, budget - 2)]
        ids = torch.tensor([list(prompt_ids) + prefix])
        torch.manual_seed(len(self.replies))
        if self.truncate:
            ends = [self.im_end, *([self.tokenizer.eos_token_id] if self.tokenizer.eos_token_id else [])]
            out = self.model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                min_new_tokens=budget - len(prefix),
                max_new_tokens=budget - len(prefix),
                do_sample=True,
                pad_token_id=self.tokenizer.pad_token_id,
                suppress_tokens=ends,
            )
            new = prefix + out[0, ids.shape[1] :].tolist()
            self.replies.append(new)
            return TokenOutput(token_ids=new, log_probs=[-0.5] * len(new), extra_fields={"global_steps": 3})
        out = self.model.generate(
            ids,
            attention_mask=torch.ones_like(ids),
            max_new_tokens=max(1, min(12, budget - len(prefix) - 1)),
            do_sample=True,
            pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.im_end,
        )
        new = prefix + out[0, ids.shape[1] :].tolist()
        if new[-1] != self.im_end and len(new) < budget:
            new.append(self.im_end)
        self.replies.append(new)
        return TokenOutput(token_ids=new, log_probs=[-0.5] * len(new), extra_fields={"global_steps": 3})


def _runs(mask: list[int]) -> list[tuple[int, int, int]]:
    """(value, start, end) runs of a 0/1 mask."""
    runs, start = [], 0
    for i in range(1, len(mask) + 1):
        if i == len(mask) or mask[i] != mask[start]:
            runs.append((mask[start], start, i))
            start = i
    return runs


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    torch.set_num_threads(1)
    return tiny_model_and_tokenizer()


def _setup(tmp_path: Path, tokenizer: Any, *overrides: str) -> tuple[Any, Any, list[dict[str, Any]]]:
    """prepare() a run folder, compose verl's config, read rows back with verl's RLHFDataset."""
    base = [
        f"verl.out_dir={tmp_path}",
        "eval.limit=1",
        "rollout.rules.max_assistant_turns=3",
        "rollout.rules.start_emotion=30",
    ]
    cfg = load_verl_config("tiny-offline", [*base, "rollout.think=false", *overrides])
    plan = prepare(cfg)
    vc = compose_verl_config(plan.overrides)
    dataset = RLHFDataset(str(plan.train_file), tokenizer, vc.data)
    return plan, vc, [dataset[i] for i in range(len(dataset))]


def _loop(vc: Any, plan: Any, server: TinyModelServer, tokenizer: Any) -> RlverDialogueAgentLoop:
    """Build the loop from the generated YAML the way verl's AgentLoopWorker does."""
    (entry,) = OmegaConf.load(plan.agent_loop_yaml)
    loop = hydra.utils.instantiate(
        config=entry,
        trainer_config=DictConfigWrap(config=vc),
        server_manager=server,
        tokenizer=tokenizer,
        processor=None,
        hf_model_type="qwen2",
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(vc.data),
        tools=ToolListWrap([]),
    )
    assert isinstance(loop, RlverDialogueAgentLoop)
    return loop


def _run(vc: Any, plan: Any, server: TinyModelServer, tokenizer: Any, row: dict[str, Any], **extra: Any):
    """One dialogue; the loop is built inside the event loop, as in verl's worker."""

    async def go() -> AgentLoopOutput:
        return await _loop(vc, plan, server, tokenizer).run(_sampling(), **row, **extra)

    return asyncio.run(go())


def task_profile(row: dict[str, Any]) -> Any:
    from rlver.integrations.verl.settings import DialogueTask

    return DialogueTask.from_row(row["extra_info"]).profile


def _sampling() -> dict[str, Any]:
    return {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


def _episodes(plan: Any) -> list[Episode]:
    """Every logged dialogue; each file starts with its run manifest (``kind: train``)."""
    from rlver.transcripts.native import read_transcript

    files = sorted((plan.out_dir / "transcripts").glob("*.jsonl"))
    assert all(read_transcript(f).run_manifest.kind == "train" for f in files)
    return [ep for f in files for ep in read_transcript(f).episodes]


def _universal_answer(change: int, end: bool = False) -> str:
    """One JSON object that satisfies the simulator's opening, appraisal and reply schemas."""
    return json.dumps(
        {
            "understanding": "they replied",
            "goal_fit": "partly",
            "inner_reaction": "noted",
            "feeling": "fine",
            "change": change,
            "stance": "neutral",
            "aim": "keep talking",
            "tone": "plain",
            "draft": "I hear you.",
            "rewrite": "shorter",
            "reply": "I hear you. Tell me more?",
            "end_dialogue": end,
        }
    )


def _llm_overrides(server: FakeChatServer) -> list[str]:
    return [
        "simulator.kind=llm",
        "simulator.model.model=fake",
        f"simulator.model.base_url={server.url}",
        "simulator.model.api_key_env=null",
        "simulator.model.max_attempts=1",
        "simulator.model.timeout_s=10",
        "simulator.cache=null",
    ]


def test_masks_tokens_reward_and_extra_fields(tmp_path: Path, tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    plan, vc, rows = _setup(tmp_path, tokenizer)  # 3 replies, all appraised, start 30
    server = TinyModelServer(model, tokenizer)
    out = _run(vc, plan, server, tokenizer, rows[0], session_id=0, global_steps=3)

    (episode,) = _episodes(plan)
    assert episode.profile_id == rows[0]["extra_info"]["profile_id"]
    turns = episode.assistant_turns
    assert 1 <= turns <= 3
    if episode.end_reason == "turn_limit":
        assert turns == 3

    # masks: assistant runs of 1, user turns of 0, starting and ending on the assistant
    runs = _runs(out.response_mask)
    assert [v for v, _, _ in runs] == [1, 0] * (turns - 1) + [1]
    assert len(out.response_ids) == len(out.response_mask) == len(out.response_logprobs or [])
    # the trained tokens are exactly the sampled tokens, in order
    assistant = [out.response_ids[s:e] for v, s, e in runs if v == 1]
    assert assistant == server.replies
    # user turns are the chat template's tokens of what the simulated user said
    users = [tokenizer.decode(out.response_ids[s:e]) for v, s, e in runs if v == 0]
    said = [m.content for m in episode.messages if m.role == "user"][1:]  # after the opening line
    for text, content in zip(users, said, strict=False):
        assert f"<|im_start|>user\n{content}<|im_end|>" in text and text.endswith("<|im_start|>assistant\n")
    # each generation saw the whole context so far (token in: prompt + response so far)
    assert server.prompts[0] == out.prompt_ids
    assert tokenizer.decode(out.prompt_ids).startswith("<|im_start|>system\n")

    # reward: our reward code on the logged episode; verl puts it on the last (assistant) token
    assert out.reward_score == pytest.approx(episode_reward(episode, RewardSpec(mode="final")))
    assert out.reward_score == pytest.approx(episode.final_emotion / 100)
    tensors = out.as_dict()
    assert tensors["rm_scores"][-1].item() == pytest.approx(out.reward_score)
    assert tensors["response_mask"][-1].item() == 1

    extra = out.extra_fields
    assert extra["emotions"] == [30, *episode.emotions] and len(episode.emotions) == turns
    assert [a["emotion_after"] for a in extra["appraisals"]] == episode.emotions
    assert extra["turn_scores"] == pytest.approx(turn_rewards(episode, RewardSpec(mode="final")))
    assert extra["reward_extra_info"]["final_emotion"] == episode.final_emotion
    # the reward-hacking watch, as the local trainer logs it (the tiny model's replies trip vetoes)
    from rlver.rollout.hackwatch import HackWatch

    profile = task_profile(rows[0])
    assert profile.id == episode.profile_id
    watch = HackWatch([profile])([episode])
    for key in ("hack/veto_rate", "hack/repeated_phrase_rate", "hack/language_mismatch_rate"):
        assert extra["reward_extra_info"][key.replace("/", "_")] == watch[key]
    assert extra["end_reason"] == episode.end_reason
    assert extra["global_steps"] == 3  # the server's extra fields are kept (off-policy bookkeeping)
    assert out.num_turns == 2 * turns  # opening + replies + answers that were appended


def test_think_is_stripped_and_emotion_ends_the_dialogue(tmp_path: Path, tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    with FakeChatServer(responder=lambda body: _universal_answer(+10)) as sim:
        plan, vc, rows = _setup(
            tmp_path,
            tokenizer,
            *_llm_overrides(sim),
            "rollout.think=true",
            "rollout.rules.max_assistant_turns=8",
            "rollout.rules.start_emotion=70",
        )
        server = TinyModelServer(model, tokenizer, think=True)
        out = _run(vc, plan, server, tokenizer, rows[1])
        requests = json.dumps(sim.requests)

    # 70 -> 80 -> 90 -> 100: the third reply ends it on the emotion rule, as an assistant turn
    (episode,) = _episodes(plan)
    assert episode.end_reason == "emotion_high" and episode.assistant_turns == 3
    assert out.extra_fields["emotions"] == [70, 80, 90, 100]
    assert out.reward_score == pytest.approx(1.0)
    assert _runs(out.response_mask)[-1][0] == 1 and len(_runs(out.response_mask)) == 5
    # the policy's tokens hold its reasoning; the simulated user never saw it
    assert SECRET in tokenizer.decode(out.response_ids)
    assert SECRET not in requests and "<think>" not in requests
    assert out.extra_fields["reward_extra_info"]["format_errors"] == episode.format_errors


def test_user_leaving_ends_on_the_assistant_turn(tmp_path: Path, tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    calls: list[int] = []

    def responder(body: dict[str, Any]) -> str:
        # bundled profiles bring their opening line, so calls go appraisal, reply, appraisal, reply...
        calls.append(1)
        return _universal_answer(-2, end=len(calls) >= 4)  # the user leaves in answer to reply 2

    with FakeChatServer(responder=responder) as sim:
        plan, vc, rows = _setup(
            tmp_path, tokenizer, *_llm_overrides(sim), "rollout.rules.max_assistant_turns=8"
        )
        assert len(rows[0]["raw_prompt"]) == 2  # system prompt + the profile's opening line
        out = _run(vc, plan, TinyModelServer(model, tokenizer), tokenizer, rows[0])
    (episode,) = _episodes(plan)
    assert episode.end_reason == "left" and episode.assistant_turns == 2
    assert out.extra_fields["emotions"] == [30, 28, 26]
    assert episode.messages[-1].role == "user"  # the goodbye is in the transcript ...
    runs = _runs(out.response_mask)
    assert [v for v, _, _ in runs] == [1, 0, 1]  # ... but not in the trajectory, which ends on the reply
    assert out.reward_score == pytest.approx(0.26)


def test_simulator_calls_share_one_limit_per_process(tmp_path: Path, tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny

    async def run_four(plan: Any, vc: Any, rows: list[dict[str, Any]]) -> int:
        SIMULATOR_GATE.reset()
        loop = _loop(vc, plan, TinyModelServer(model, tokenizer), tokenizer)
        outs = await asyncio.gather(*(loop.run(_sampling(), **row) for row in rows[:4]))
        assert len(outs) == 4 and SIMULATOR_GATE.operations >= 4 * 2
        return SIMULATOR_GATE.peak

    with FakeChatServer(responder=lambda body: _universal_answer(+1), latency_s=0.02) as sim:
        peaks = {}
        for limit in (1, 4):
            overrides = [*_llm_overrides(sim), f"rollout.simulator_concurrency={limit}"]
            peaks[limit] = asyncio.run(run_four(*_setup(tmp_path / f"limit{limit}", tokenizer, *overrides)))
    assert peaks[1] == 1
    assert peaks[4] > 1  # the limit, not the test, is what serialised them


def test_simulator_failure_fails_the_dialogue_loudly(tmp_path: Path, tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    with FakeChatServer(responder=lambda body: "not json at all") as sim:
        plan, vc, rows = _setup(tmp_path, tokenizer, *_llm_overrides(sim))
        with pytest.raises(DialogueFailed, match=rows[0]["extra_info"]["profile_id"]):
            _run(vc, plan, TinyModelServer(model, tokenizer), tokenizer, rows[0])
    assert _episodes(plan) == []  # a failed dialogue is never scored or logged as finished


def test_context_budget_stops_on_an_assistant_turn(tmp_path: Path, tiny: tuple[Any, Any]) -> None:
    model, tokenizer = tiny
    # 64 response tokens per dialogue: the budget, not the turn limit (8), ends it
    plan, vc, rows = _setup(
        tmp_path,
        tokenizer,
        "model.max_length=448",
        "verl.max_prompt_tokens=384",
        "rollout.rules.max_assistant_turns=8",
    )
    assert rows, "every opening was longer than verl.max_prompt_tokens"
    server = TinyModelServer(model, tokenizer)
    out = _run(vc, plan, server, tokenizer, rows[0])
    assert vc.data.max_response_length == 64
    assert len(out.response_mask) <= 64 and out.response_mask[-1] == 1
    assert out.extra_fields["end_reason"] == "context_full"
    assert [v for v, _, _ in _runs(out.response_mask)][-1] == 1
    assert len(server.replies) == out.extra_fields["reward_extra_info"]["assistant_turns"] < 8


def test_a_reply_cut_at_max_tokens_is_closed_untrained(tmp_path: Path, tiny: tuple[Any, Any]) -> None:
    """vLLM at max_tokens adds no end token: the loop closes the turn (mask 0) before the user's turn."""
    model, tokenizer = tiny
    plan, vc, rows = _setup(tmp_path, tokenizer, "rollout.max_new_tokens=6")
    server = TinyModelServer(model, tokenizer, truncate=True)
    out = _run(vc, plan, server, tokenizer, rows[0])
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert all(len(r) == 6 and im_end not in r for r in server.replies)  # every reply was cut
    runs = _runs(out.response_mask)
    turns = len(server.replies)
    assert turns >= 2 and [v for v, _, _ in runs] == [1, 0] * (turns - 1) + [1]
    # trained: exactly the sampled tokens; the closing token right after each cut reply is mask 0
    assert [out.response_ids[s:e] for v, s, e in runs if v == 1] == server.replies
    for _v, s, _e in runs[1::2]:
        assert out.response_ids[s] == im_end
        assert tokenizer.decode(out.response_ids[s : s + 8]).startswith("<|im_end|>\n<|im_start|>user")
    text = tokenizer.decode(out.prompt_ids + out.response_ids)
    assert text.count("<|im_start|>") == text.count("\n<|im_start|>") + text.startswith("<|im_start|>")
    assert len(out.response_logprobs or []) == len(out.response_ids)
    assert out.extra_fields["truncated_replies"] == turns
    assert out.response_mask[-1] == 1  # the last reply is not closed: nothing follows it


def test_a_failed_dialogue_fails_its_whole_group(tmp_path: Path, tiny: tuple[Any, Any]) -> None:
    """verl keeps a failed group's survivors; we fail every sibling so verl refills the group."""
    model, tokenizer = tiny

    class OneEmptyReply(TinyModelServer):
        async def generate(self, request_id: str, **kw: Any):  # type: ignore[no-untyped-def]
            out = await super().generate(request_id, **kw)
            return TokenOutput(token_ids=[], log_probs=[]) if len(self.replies) == 3 else out

    plan, vc, rows = _setup(tmp_path, tokenizer, "rollout.n_per_profile=2", "rollout.batch_size=4")
    assert vc.trainer.v1.sampler.sync_refill_failed_groups
    server = OneEmptyReply(model, tokenizer)

    async def group(uid: str) -> list[Any]:
        loop = _loop(vc, plan, server, tokenizer)
        return await asyncio.gather(
            *(loop.run(_sampling(), **rows[0], uid=uid, session_id=i) for i in range(2)),
            return_exceptions=True,
        )

    results = asyncio.run(group("u1"))
    assert all(isinstance(r, DialogueFailed) for r in results), results
    assert sum("of its group" in str(r) for r in results) == 1  # the sibling that had finished
    assert _episodes(plan) == []  # neither the failure nor its sibling is logged as trained
    # a group without failures returns both dialogues, and logs them
    ok = asyncio.run(group("u2"))
    assert all(isinstance(r, AgentLoopOutput) for r in ok) and len(_episodes(plan)) == 2


class SometimesNoThink(TinyModelServer):
    """Think mode where every other reply skips its think block: a format error the penalty charges."""

    async def generate(self, request_id: str, **kw: Any):  # type: ignore[no-untyped-def]
        self.think = len(self.replies) % 2 == 0
        return await super().generate(request_id, **kw)


def _local_rows(cfg: Any, episode: Episode, tokenizer: Any) -> list[tuple[list[int], list[float], float]]:
    """What the local trainer trains on for ``episode``: per sample, the trained token ids, the reward
    on each trained token and the sample's score, through the trainer's own tokenisation and reward
    placement (``rlver.train.learner.make_samples`` and ``pad_batch``)."""
    from rlver.train.learner import make_samples, pad_batch

    samples, dropped = make_samples([episode], tokenizer, cfg.rollout, cfg.model.max_length)
    assert dropped == 0
    rows = []
    for sample in samples:
        q, batch = sample.seq, pad_batch([sample])
        grid = batch.token_rewards[0]
        trained = [j for j in range(1, len(q)) if q.assistant_mask[j]]
        rows.append(
            ([q.input_ids[j] for j in trained], [float(grid[j - 1]) for j in trained], float(batch.scores[0]))
        )
    return rows


def _verl_rows(outputs: list[AgentLoopOutput]) -> list[tuple[list[int], list[float], float]]:
    """The same from the agent loop's outputs, as verl's v1 trainer reads them (``rm_scores``)."""
    rows = []
    for out in outputs:
        scores = out.as_dict()["rm_scores"].tolist()
        trained = [i for i, m in enumerate(out.response_mask) if m]
        assert all(
            scores[i] == 0.0 for i in range(len(scores)) if i not in trained
        )  # rewards on trained tokens
        rows.append(([out.response_ids[i] for i in trained], [scores[i] for i in trained], sum(scores)))
    return rows


def _returns(rewards: list[float], gamma: float, lam: float) -> list[float]:
    """verl's own GAE (values 0) over one sample's trained tokens: the returns its critic regresses on."""
    from verl.trainer.ppo.core_algos import compute_gae_advantage_return

    r = torch.tensor([rewards])
    _, ret = compute_gae_advantage_return(r, torch.zeros_like(r), torch.ones_like(r), gamma, lam)
    return ret[0].tolist()


@pytest.mark.parametrize("think_context", ["full", "visible"])
@pytest.mark.parametrize("mode", ["final", "delta", "mixed"])
def test_per_token_rewards_and_returns_match_the_local_trainer(
    tmp_path: Path, tiny: tuple[Any, Any], mode: str, think_context: str
) -> None:
    """Random per-turn emotion changes, a format penalty on every other reply: the local trainer and the
    verl agent loop put the same reward on the same trained tokens, so the returns (verl's own GAE) and
    GRPO scores agree token by token, in both think layouts. (Before: verl summed the turns into one
    score on the last token, and a visible-layout turn sample earned the whole dialogue's reward.)"""
    import random

    from rlver.records import SampledTurn

    model, tokenizer = tiny
    changes = random.Random(f"{mode}-{think_context}")
    with FakeChatServer(responder=lambda body: _universal_answer(changes.randint(-15, 15))) as sim:
        plan, vc, rows = _setup(
            tmp_path,
            tokenizer,
            *_llm_overrides(sim),
            "rollout.think=true",
            f"rollout.think_context={think_context}",
            "rollout.rules.max_assistant_turns=4",
            "rollout.rules.start_emotion=50",
            f"rollout.reward.mode={mode}",
            "rollout.reward.format_penalty=0.1",
            "algorithm.gamma=0.9",
            "algorithm.lam=0.8",
        )
        server = SometimesNoThink(model, tokenizer, think=True)
        out = _run(vc, plan, server, tokenizer, rows[0])
    outputs = out if isinstance(out, list) else [out]
    (episode,) = _episodes(plan)
    assert episode.assistant_turns >= 2 and episode.format_errors >= 1
    assert len(set(turn_rewards(episode, RewardSpec(mode=mode, format_penalty=0.1)))) > 1  # not all equal
    episode.sampled = [SampledTurn(token_ids=r, logprobs=[-0.5] * len(r)) for r in server.replies]
    cfg = load_verl_config("tiny-offline", [f"verl.out_dir={tmp_path}", "rollout.think=true",
                                            f"rollout.think_context={think_context}",
                                            f"rollout.reward.mode={mode}", "rollout.reward.format_penalty=0.1"])  # fmt: skip
    local, remote = _local_rows(cfg, episode, tokenizer), _verl_rows(outputs)
    assert len(local) == len(remote) == (episode.assistant_turns if think_context == "visible" else 1)
    for (l_ids, l_rew, l_score), (v_ids, v_rew, v_score) in zip(local, remote, strict=True):
        assert l_ids == v_ids  # the same trained tokens ...
        assert l_rew == pytest.approx(v_rew, abs=1e-6)  # ... the same reward on each ...
        assert _returns(l_rew, 0.9, 0.8) == pytest.approx(_returns(v_rew, 0.9, 0.8), abs=1e-6)
        assert l_score == pytest.approx(v_score, abs=1e-6)  # ... and the same GRPO score
    if think_context == "visible":  # each turn earns the reward from its turn on, not the dialogue's
        per_turn = turn_rewards(episode, RewardSpec(mode=mode, format_penalty=0.1))
        assert [s for _, _, s in remote] == pytest.approx([sum(per_turn[k:]) for k in range(len(per_turn))])
        assert all(SECRET not in tokenizer.decode(o.prompt_ids) for o in outputs)  # thought-free history
