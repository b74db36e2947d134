"""Titans sequence models: MAC, MAG, MAL, LMM and a sliding-window-attention baseline (section 4).

``titans_agent.models.tasks`` holds the long-context tasks (associative recall, permutation
composition) and the training loop behind ``benchmarks/long_context.py`` and ``titans-agent train``;
its configuration and entry point (:class:`TaskConfig`, :func:`train_and_eval` and their reports)
are exported here too.
"""

from titans_agent.models.architectures import TitansLM, build_model
from titans_agent.models.config import ARCHITECTURES, ModelConfig
from titans_agent.models.layers import LayerMemoryState, NeuralMemoryLayer
from titans_agent.models.tasks import ArchitectureResult, TaskConfig, TaskReport, train_and_eval

__all__ = [
    "ARCHITECTURES",
    "ArchitectureResult",
    "LayerMemoryState",
    "ModelConfig",
    "NeuralMemoryLayer",
    "TaskConfig",
    "TaskReport",
    "TitansLM",
    "build_model",
    "train_and_eval",
]
