"""Data shipped with titans-agent: the meta-learned parameters of the neural memory.

``memory_meta.safetensors`` holds the outer parameters of :class:`~titans_agent.core.memory.NeuralMemory`
(``W_K``, ``W_V``, ``W_Q``, ``gate_weight``, ``gate_bias``, ``M0.0``, ``M0.1``; float16) meta-learned
by ``benchmarks/train_memory.py`` (its docstring gives the command and the data recipe: Python
standard-library docstrings, never LoCoMo) for all-MiniLM-L6-v2 embeddings and the default
:class:`~titans_agent.config.MemoryConfig`. Its header metadata names the configuration it was
trained for, the steps and the validation numbers. ``MemoryConfig(init="meta-learned")`` loads it.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources

import torch
from torch import Tensor

from titans_agent.config import MemoryConfig
from titans_agent.errors import InvalidInputError

__all__ = ["META_FILE", "META_FIELDS", "meta_learned_metadata", "meta_learned_params"]

META_FILE = "memory_meta.safetensors"
# The configuration fields the parameters depend on: shapes (dim, depth, expansion), the function
# they were trained through (activation) and the meaning of the gate logits (theta_max, alpha_max).
META_FIELDS = ("dim", "depth", "expansion", "activation", "theta_max", "alpha_max")


@lru_cache(maxsize=1)
def _read() -> tuple[dict[str, Tensor], dict[str, str]]:
    from safetensors import safe_open

    ref = resources.files(__name__) / META_FILE
    with resources.as_file(ref) as path:
        if not path.is_file():
            raise InvalidInputError(f"the meta-learned memory parameters ({META_FILE}) are missing from the package")
        with safe_open(str(path), framework="pt") as f:
            meta = dict(f.metadata() or {})
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    return tensors, meta


def meta_learned_metadata() -> dict[str, str]:
    """The shipped file's header metadata: ``config`` (JSON of the MemoryConfig it was trained for),
    ``embedder``, ``steps``, ``corpus``, ``corpus_sha256``, ``objective``, ``validation`` (JSON).

    Raises:
        InvalidInputError: the file is missing from the installation.
    """
    return dict(_read()[1])


def meta_learned_params(config: MemoryConfig) -> dict[str, Tensor]:
    """The meta-learned outer parameters for ``config``, as ``NeuralMemory.state_dict()`` names to
    fresh float32 CPU tensors (cast them to the memory's dtype and device).

    Raises:
        InvalidInputError: the file is missing, or ``config`` differs from the configuration the
            parameters were trained for in one of ``META_FIELDS`` (they would not fit or would
            mean something else), or a stored tensor is not finite.
    """
    tensors, meta = _read()
    trained = json.loads(meta.get("config", "{}"))
    diff = [
        f"{k}={getattr(config, k)!r} (trained: {trained.get(k)!r})"
        for k in META_FIELDS
        if trained.get(k) != getattr(config, k)
    ]
    if diff:
        raise InvalidInputError(
            "the meta-learned memory parameters exist only for the configuration they were trained for; "
            f"this one differs in {', '.join(diff)}: use MemoryConfig(init='random')"
        )
    out = {k: v.to(torch.float32).clone() for k, v in tensors.items()}
    if not all(bool(torch.isfinite(v).all()) for v in out.values()):
        raise InvalidInputError(f"{META_FILE} holds non-finite values")
    return out
