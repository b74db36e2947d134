"""Titans sequence models: MAC, MAG, MAL, LMM and a sliding-window-attention baseline (section 4).

``titans_agent.models.tasks`` holds the long-context tasks (associative recall, permutation
composition) and the training loop behind ``benchmarks/long_context.py``.
"""

from titans_agent.models.architectures import TitansLM, build_model
from titans_agent.models.config import ARCHITECTURES, ModelConfig
from titans_agent.models.layers import LayerMemoryState, NeuralMemoryLayer

__all__ = ["ARCHITECTURES", "LayerMemoryState", "ModelConfig", "NeuralMemoryLayer", "TitansLM", "build_model"]
