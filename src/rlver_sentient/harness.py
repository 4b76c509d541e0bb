"""The assistant's harness: one chat completion per turn, asked in this process.

Why a harness of its own: verifiers' built-in chat harnesses (``null``, ``bash``) run each segment as a
separate program that ``uv`` installs on first use (openai, mcp, ...), one process per turn. Here a turn
is one request, so the harness sends it itself, to the rollout's interception endpoint as every
harness must (verifiers records the call, its tokens and its sampling there; the trainer reads them).

What it sends is the policy's context as rlver's dialogue keeps it
(:meth:`rlver.env.dialogue.DialogueEnv.messages_for_policy`: the system prompt, the user's lines, the
assistant's earlier replies, with think text handled as the dialogue rules say). The env hands the
dialogue over on the trace's state; the reply goes back the same way, untouched (think text included).
Beside the messages the body carries the sampling fields ``rlver eval`` sends for the same settings
and sampling values (:meth:`~rlver_sentient.taskset.SentientTasksetConfig.agent_fields`: none under
SAGE's prompt with no value set), so the endpoint gets the same body by either route.
"""

from __future__ import annotations

import time
from typing import Any

import aiohttp
import verifiers.v1 as vf

from rlver.llm.base import Completion
from rlver_sentient.exchange import Exchange


class SentientHarnessConfig(vf.HarnessConfig):
    pass


class SentientHarness(vf.Harness[SentientHarnessConfig]):
    """Sends the dialogue's policy context to the interception endpoint and keeps the reply."""

    APPENDS_SYSTEM_PROMPT = True
    #: verifiers' own ``resume`` relaunches :meth:`launch` on the conversation so far; ``launch`` answers
    #: the dialogue the env keeps (the user's turn is already in it), so that default is the whole job
    SUPPORTS_RESUME = True
    EXECUTES_CODE = False
    NEEDS_CONTAINER = False

    async def launch(
        self,
        ctx: vf.ModelContext,
        trace: vf.Trace,
        runtime: vf.Runtime,
        endpoint: str,
        secret: str,
        mcp_urls: dict[str, str],
        data: vf.TaskData,
    ) -> vf.ProgramResult:
        exchange = getattr(trace.state, "exchange", None)
        if not isinstance(exchange, Exchange):
            raise vf.HarnessError(
                "the rlver-sentient harness answers only the rlver-sentient env's dialogues "
                "(no dialogue on this trace)"
            )
        messages = [{"role": m.role, "content": m.content} for m in exchange.dialogue.messages_for_policy()]
        exchange.stated = _stated(ctx.sampling)
        started = time.perf_counter()
        status, payload, text = await _post(
            exchange.http,
            f"{endpoint.rstrip('/')}/chat/completions",
            secret,
            {"model": ctx.model, "messages": messages, **exchange.agent_fields(exchange.stated)},
        )
        if status != 200 or payload is None:
            return vf.ProgramResult(exit_code=1, stdout="", stderr=f"HTTP {status}: {text[:2000]}")
        exchange.reply = _completion(payload, time.perf_counter() - started)
        return vf.ProgramResult(exit_code=0, stdout="", stderr="")


def _stated(sampling: vf.Sampling | None) -> dict[str, Any]:
    """The sampling values the run set (verifiers' ``--sampling.*``); verifiers lays the same values
    over the body it forwards, so the body rlver builds from them is the one the endpoint gets."""
    return sampling.model_dump(exclude_none=True) if sampling is not None else {}


async def _post(
    session: aiohttp.ClientSession, url: str, secret: str, body: dict[str, Any]
) -> tuple[int, dict[str, Any] | None, str]:
    """One JSON POST: the status, the parsed answer (None when it is not JSON) and its text."""
    async with session.post(url, json=body, headers={"Authorization": f"Bearer {secret}"}) as response:
        text = await response.text()
        try:
            payload = await response.json(content_type=None)
        except ValueError:
            payload = None
        return response.status, payload if isinstance(payload, dict) else None, text


def _completion(payload: dict[str, Any], latency_s: float) -> Completion:
    """The chat completion as rlver's :class:`Completion` (the text as sampled, think text included)."""
    choice = (payload.get("choices") or [{}])[0]
    usage = payload.get("usage") or {}
    return Completion(
        text=(choice.get("message") or {}).get("content") or "",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        latency_s=latency_s,
        finish_reason=choice.get("finish_reason"),
    )
