"""The default device — decided here once: CUDA when this process can use a card, else the CPU.

Why one home: the chat-model wrapper (``llm/local.py``), the training loader (``train/loading.py``) and
the memory guard's probe (``train/memory_guard.device_memory``) each read an unset ``model.device``;
with three copies of the rule, a change to one (MPS, a ``CUDA_VISIBLE_DEVICES`` policy) would leave a
run whose guard measured one device while its loader picked another.
"""

from __future__ import annotations


def default_device() -> str:
    """``"cuda"`` when ``torch.cuda.is_available()``, else ``"cpu"``: what an unset ``device`` means."""
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"
