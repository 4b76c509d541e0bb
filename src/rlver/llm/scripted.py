"""A chat model that answers from a script: a test double for an LLM's *text*, never for our code.

Used by tests and the offline tooling wherever what matters is the code around the model (parsing,
retries, termination, masks), not the model's wisdom.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from rlver.llm.base import ChatModel, Completion, MessagesLike, SamplingParams

Responder = Callable[[MessagesLike, SamplingParams], str]


class ScriptedChatModel(ChatModel):
    """Returns texts from a list (cycled) or from a function of the messages."""

    def __init__(
        self,
        replies: Sequence[str] | Responder,
        *,
        name: str = "scripted",
        delay_s: float = 0.0,
    ) -> None:
        self.name = name
        self._replies = replies
        self._delay_s = delay_s
        self.calls: list[list[str]] = []
        self._i = 0

    async def complete(self, messages: MessagesLike, sampling: SamplingParams) -> Completion:
        if self._delay_s:
            await asyncio.sleep(self._delay_s)
        self.calls.append([m.content for m in messages])
        if callable(self._replies):
            text = self._replies(messages, sampling)
        else:
            text = self._replies[self._i % len(self._replies)]
            self._i += 1
        return Completion(
            text=text,
            prompt_tokens=sum(len(m.content.split()) for m in messages),
            completion_tokens=len(text.split()),
            finish_reason="stop",
        )
