"""How we talk to any model: one async ChatModel interface and its backends.

``base`` (interface), ``openai_client`` (any OpenAI-compatible server, bounded retries), ``local``
(a transformers model, batched generation), ``cache`` (sqlite replay), ``factory`` (from a ModelSpec),
``scripted`` (a test double for a model's text), ``structured`` (one JSON answer: find it, validate it,
re-ask once; used by the simulator, the judge and profile generation). Backends import their heavy
dependencies lazily.
"""
