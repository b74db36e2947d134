"""The Titans neural long-term memory (Behrouz, Zhong, Mirrokni 2024, arXiv 2501.00663, sec. 3).

Pure torch, no I/O. The memory is an MLP ``M`` whose weights are learned at test time: each input
token ``x_t`` (here: one embedding per text unit, shape ``(d,)``) is projected to a key, a value and a
query (eq. 11, 15)::

    k_t = normalize(W_K x_t)     v_t = W_V x_t     q_t = normalize(W_Q x_t)

and written by one step of gradient descent with momentum and a forgetting gate on the associative
loss ``l(M; x_t) = ||M(k_t) - v_t||^2`` (eq. 12-14)::

    S_t = eta_t * S_{t-1} - theta_t * grad l(M_{t-1}; x_t)      momentum ("past surprise")
    M_t = (1 - alpha_t) * M_{t-1} + S_t                          forgetting gate (weight decay)

with per-token, data-dependent gates theta_t in (0, theta_max), eta_t in (0, 1) and
alpha_t in (0, alpha_max) (section 3.2). Reading is a forward pass without a weight change (eq. 15):
``y = M*(q)``.

Sequences are processed in chunks of ``b`` tokens (section 3.2, docs/titans.md section 2): inside a
chunk every gradient is taken at the weights at the START of that chunk, for every chunk, and the
chunk's effect is a few matmuls::

    S_b = m_b S_0 - sum_i n_{i,b} u_i
    M_b = beta_b M_0 + f_b S_0 - sum_i G_{b,i} u_i

where ``u_i`` is token i's gradient at the chunk start (an outer product per layer, ``delta_i a_i^T``),
``beta``, ``m`` are the cumulative products of ``(1 - alpha)`` and ``eta``, ``n_{i,k} = theta_i
prod_{j=i+1..k} eta_j`` and ``G_{b,i} = sum_{k=i..b} (beta_b / beta_k) n_{i,k}``; all products are
computed in log space. Chunk boundaries are global token positions (``step`` modulo ``b``): a chunk
left unfinished by one call is kept as ``pending`` inputs in the state and completed by the next
call, so splitting a sequence across calls equals one call, exactly.

The state is an explicit value (:class:`MemoryState`) passed in and out; it serialises with
safetensors (:func:`state_to_bytes`), never pickle. A chunk whose update would make any weight or
momentum non-finite is rejected: the state before it is kept and the result reports it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from safetensors.torch import load as st_load
from safetensors.torch import save as st_save
from torch import Tensor, nn

from titans_agent.config import MemoryConfig
from titans_agent.core.scan import ScanResult, memory_scan, mlp_forward
from titans_agent.errors import CorruptBlobError, InvalidInputError, NonFiniteStateError

__all__ = [
    "CorruptBlobError",
    "MemoryState",
    "NeuralMemory",
    "UpdateResult",
    "resolve_device",
    "state_from_bytes",
    "state_to_bytes",
]

log = logging.getLogger(__name__)

_EPS = 1e-12


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """Map ``"auto"`` to CUDA when available, else CPU; pass anything else to ``torch.device``.

    Raises:
        InvalidInputError: the device string is not understood, or CUDA was asked for and is absent.
    """
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InvalidInputError(f"unknown device {device!r}") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InvalidInputError(f"device {device!r} asked for, but CUDA is not available")
    return dev


@dataclass(frozen=True)
class MemoryState:
    """The test-time state of the memory: what a namespace persists.

    Attributes:
        weights: the memory MLP's weights at the start of the current chunk, one ``(out, in)``
            tensor per layer (``(d*e, d)``, ..., ``(d, d*e)``; ``(d, d)`` for depth 1).
        momentum: the momentum S at the same point, same shapes as ``weights``.
        pending: inputs ``(r, d)`` of the unfinished current chunk, ``0 <= r < chunk_size``; they are
            already part of the memory (see :meth:`NeuralMemory.effective_weights`).
        step: tokens written so far (including ``pending``).
    """

    weights: tuple[Tensor, ...]
    momentum: tuple[Tensor, ...]
    pending: Tensor
    step: int
    _effective: list[tuple[Tensor, ...]] = field(default_factory=list, repr=False, compare=False)

    def is_finite(self) -> bool:
        """True when every weight, momentum and pending value is finite."""
        return _all_finite((*self.weights, *self.momentum, self.pending))

    def clone(self) -> MemoryState:
        """A deep copy (new tensors, same values, dtypes and device)."""
        return MemoryState(
            tuple(w.clone() for w in self.weights),
            tuple(m.clone() for m in self.momentum),
            self.pending.clone(),
            self.step,
        )


def _all_finite(tensors: tuple[Tensor, ...] | list[Tensor]) -> bool:
    """True when no tensor holds a NaN or Inf (one reduction per tensor: a sum is non-finite iff
    some element is, or the sum itself overflowed, which also marks a state as unusable)."""
    total = sum((t.sum() for t in tensors if t.numel()), torch.zeros(()))
    return bool(torch.isfinite(total))


@dataclass(frozen=True)
class UpdateResult:
    """What :meth:`NeuralMemory.update` returns.

    Attributes:
        state: the state after the update.
        surprise: ``(n,)`` relative loss ``||M(k_t) - v_t||^2 / ||v_t||^2`` of each token under the
            weights its gradient was taken at (the chunk start): the momentary surprise, eq. 12.
        theta, eta, alpha: ``(n,)`` the gates used for each token.
        rejected_chunks: chunks whose update was non-finite and therefore not applied.
    """

    state: MemoryState
    surprise: Tensor
    theta: Tensor
    eta: Tensor
    alpha: Tensor
    rejected_chunks: int = 0


class NeuralMemory(nn.Module):
    """The long-term memory module: projections, gates and the initial weights M_0.

    The module's parameters are the outer (meta-learnable) ones: ``W_K``, ``W_V``, ``W_Q`` (eq. 11,
    15), the gate projection (theta, eta, alpha from x_t) and ``M_0``. The inner weights live in a
    :class:`MemoryState` passed in and out of :meth:`update` and :meth:`read`; gradients of the outer
    parameters flow through the inner update (it is written in differentiable torch).

    Args:
        config: the memory configuration; ``config.init`` picks seeded random outer parameters or
            the meta-learned ones shipped in :mod:`titans_agent.data`.
        device: where the parameters and states live ("auto": CUDA when available, else CPU).
        initialise: False leaves the outer parameters zero, for a module whose parameters are
            loaded next (:func:`params_from_bytes`): no random draw, no QR, no shipped file read.

    Raises:
        InvalidInputError: ``config.init`` is "meta-learned" and ``config`` is not the
            configuration the shipped parameters were trained for.
    """

    def __init__(self, config: MemoryConfig, device: str | torch.device = "cpu", *, initialise: bool = True) -> None:
        super().__init__()
        self.config = config
        dev = resolve_device(device)
        dtype = torch.float64 if config.dtype == "float64" else torch.float32
        gen = torch.Generator().manual_seed(config.seed)
        d, h = config.dim, config.dim * config.expansion

        def randn(*shape: int) -> Tensor:
            return torch.randn(*shape, generator=gen, dtype=torch.float64) if initialise else torch.zeros(*shape)

        def orthogonal(rows: int, cols: int) -> Tensor:
            if not initialise:
                return torch.zeros(rows, cols, dtype=dtype)
            a = torch.randn(max(rows, cols), min(rows, cols), generator=gen, dtype=torch.float64)
            qm, r = torch.linalg.qr(a)
            qm = qm * torch.sign(torch.diagonal(r))[None, :]
            return (qm if rows >= cols else qm.T).to(dtype)

        self.W_K = nn.Parameter(orthogonal(d, d))
        self.W_V = nn.Parameter(orthogonal(d, d))
        self.W_Q = nn.Parameter(self.W_K.detach().clone())
        # Gates: logits = x @ gate_weight.T + gate_bias -> (theta, eta, alpha).
        logit = lambda p: math.log(p / (1.0 - p))  # noqa: E731
        self.gate_weight = nn.Parameter(0.01 * randn(3, d).to(dtype))
        self.gate_bias = nn.Parameter(
            torch.tensor(
                [
                    logit(config.theta_init / config.theta_max),
                    logit(config.eta_init),
                    logit(config.alpha_init / config.alpha_max),
                ],
                dtype=dtype,
            )
        )
        if config.depth == 1:
            shapes = [(d, d)]
        else:
            shapes = [(h, d)] + [(h, h)] * (config.depth - 2) + [(d, h)]
        init = []
        for i, (o, n_in) in enumerate(shapes):
            scale = 1.0 / math.sqrt(n_in)
            if config.depth > 1 and i == len(shapes) - 1:
                scale *= 0.1  # the residual branch starts small: M_0(k) ~ k
            w = randn(o, n_in) * scale
            init.append(nn.Parameter(w.to(dtype)))
        self.M0 = nn.ParameterList(init)
        if initialise and config.init == "meta-learned":  # the shipped parameters (titans_agent/data)
            from titans_agent.data import meta_learned_params

            self.load_state_dict({k: v.to(dtype) for k, v in meta_learned_params(config).items()}, strict=True)
        self.to(dev)

    # ------------------------------------------------------------------ basics
    @property
    def device(self) -> torch.device:
        return self.W_K.device

    @property
    def dtype(self) -> torch.dtype:
        return self.W_K.dtype

    def init_state(self) -> MemoryState:
        """The state before anything is written: weights M_0, zero momentum, step 0."""
        weights = tuple(p.clone() for p in self.M0)  # differentiable w.r.t. M_0 when grad is on
        return MemoryState(
            weights=weights,
            momentum=tuple(torch.zeros_like(w) for w in weights),
            pending=torch.zeros(0, self.config.dim, dtype=self.dtype, device=self.device),
            step=0,
        )

    def _check_x(self, x: Tensor) -> Tensor:
        if x.ndim != 2 or x.shape[1] != self.config.dim:
            raise InvalidInputError(f"expected inputs of shape (n, {self.config.dim}), got {tuple(x.shape)}")
        return x.to(device=self.device, dtype=self.dtype)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Keys, values and queries of inputs ``x`` ``(n, d)``: each ``(n, d)`` (eq. 11, 15)."""
        x = self._check_x(x)
        k = F.normalize(x @ self.W_K.T, dim=-1, eps=_EPS)
        v = x @ self.W_V.T
        q = F.normalize(x @ self.W_Q.T, dim=-1, eps=_EPS)
        return k, v, q

    def values(self, x: Tensor) -> Tensor:
        """Value projections ``W_V x`` ``(n, d)`` of inputs ``(n, d)``: what a read is compared to."""
        return self._check_x(x) @ self.W_V.T

    def gates(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """Data-dependent gates (theta, eta, alpha), each ``(n,)``, of inputs ``(n, d)`` (sec. 3.2)."""
        z = self._check_x(x) @ self.gate_weight.T + self.gate_bias
        theta = self.config.theta_max * torch.sigmoid(z[:, 0])
        eta = torch.sigmoid(z[:, 1])
        alpha = self.config.alpha_max * torch.sigmoid(z[:, 2])
        return theta, eta, alpha

    # ------------------------------------------------------------------ forward
    def apply_memory(self, weights: tuple[Tensor, ...], k: Tensor) -> Tensor:
        """``M(k)`` ``(n, d)`` with the given inner weights, for keys or queries ``(n, d)``."""
        return mlp_forward(weights, k, self.config.activation)

    def _scan(
        self,
        weights: tuple[Tensor, ...],
        momentum: tuple[Tensor, ...],
        k: Tensor,
        v: Tensor,
        gates: tuple[Tensor, Tensor, Tensor],
    ) -> ScanResult:
        """Run :func:`titans_agent.core.scan.memory_scan` on one sequence of keys and values
        ``(n, d)`` from a chunk start."""
        theta, eta, alpha = gates
        return memory_scan(
            tuple(w.unsqueeze(0) for w in weights),
            tuple(s.unsqueeze(0) for s in momentum),
            k.unsqueeze(0),
            v.unsqueeze(0),
            theta.unsqueeze(0),
            eta.unsqueeze(0),
            alpha.unsqueeze(0),
            chunk_size=self.config.chunk_size,
            activation=self.config.activation,
            max_grad_norm=self.config.max_grad_norm,
            reject_nonfinite=True,
        )

    def update(
        self,
        state: MemoryState,
        x: Tensor,
        gates: tuple[Tensor, Tensor, Tensor] | None = None,
        kv: tuple[Tensor, Tensor] | None = None,
    ) -> UpdateResult:
        """Write inputs ``x`` ``(n, d)`` into the memory (eq. 12-14, chunked as in section 3.2).

        Args:
            state: the state to start from (not modified).
            x: one row per token.
            gates: optional explicit ``(theta, eta, alpha)``, each ``(n,)``; default: from x.
            kv: optional keys and values ``(n, d)`` of ``x`` already computed by :meth:`project`
                (the pending tokens' are computed here).

        Returns:
            The new state and, per token, the surprise and the gates used.

        Raises:
            InvalidInputError: ``x`` has the wrong shape.
        """
        x = self._check_x(x)
        n = x.shape[0]
        b = self.config.chunk_size
        if gates is None:
            gates = self.gates(x)
        theta, eta, alpha = (g.to(device=self.device, dtype=self.dtype) for g in gates)
        # Complete the pending chunk: recompute it from the chunk start with the new tokens.
        r = state.pending.shape[0]
        xs = torch.cat([state.pending, x]) if r else x
        if r:
            pt, pe, pa = self.gates(state.pending)
            theta, eta, alpha = torch.cat([pt, theta]), torch.cat([pe, eta]), torch.cat([pa, alpha])
        if kv is None:
            k, v, _ = self.project(xs)
        else:
            k, v = kv
            if r:
                kp, vp, _ = self.project(state.pending)
                k, v = torch.cat([kp, k]), torch.cat([vp, v])
        res = self._scan(state.weights, state.momentum, k, v, (theta, eta, alpha))
        weights = tuple(w[0] for w in res.weights)
        momentum = tuple(m[0] for m in res.momentum)
        rejected = int(res.rejected[0])
        full = (xs.shape[0] // b) * b
        pending = xs[full:]
        effective: list[tuple[Tensor, ...]] = []
        if res.tail_weights is not None:
            if bool(res.tail_ok[0]):
                effective.append(tuple(w[0] for w in res.tail_weights))  # reads need them next
            elif full == 0:
                # The unfinished chunk held the earlier calls' pending tokens and this call's: keep
                # the state before this call (its pending tokens), drop only this call's tokens.
                pending = xs[:r]
            else:
                pending = pending[:0]  # only this call's tokens were in the rejected tail
        surprise = res.surprise[0, r:]
        new = MemoryState(weights, momentum, pending, state.step + n, effective)
        return UpdateResult(new, surprise, theta[r:], eta[r:], alpha[r:], rejected)

    def forward(self, state: MemoryState | None, x: Tensor, q: Tensor) -> tuple[UpdateResult, Tensor]:
        """Write ``x`` ``(n, d)`` then read ``q`` ``(m, d)`` from the updated memory.

        ``state`` None starts from M_0. Differentiable in every outer parameter (W_K, W_V, W_Q,
        the gates, M_0), which is what meta-learning them needs (docs/titans.md section 5, oracle 6).

        Returns:
            The update's result and the read-out ``(m, d)``.
        """
        res = self.update(self.init_state() if state is None else state, x)
        return res, self.read(res.state, q)

    def effective_weights(self, state: MemoryState) -> tuple[Tensor, ...]:
        """The weights as of the last written token: the chunk start plus the pending tokens."""
        if state.pending.shape[0] == 0:
            return state.weights
        if state._effective:
            return state._effective[0]
        k, v, _ = self.project(state.pending)
        res = self._scan(state.weights, state.momentum, k, v, self.gates(state.pending))
        assert res.tail_weights is not None  # pending is shorter than a chunk
        w = tuple(t[0] for t in res.tail_weights)
        state._effective.append(w)
        return w

    # ------------------------------------------------------------------ read
    def read(self, state: MemoryState, x: Tensor) -> Tensor:
        """Retrieve ``y = M*(q)`` ``(n, d)`` for inputs ``x`` ``(n, d)`` (eq. 15); no weight change."""
        _, _, q = self.project(x)
        return self.apply_memory(self.effective_weights(state), q)

    def write(self, state: MemoryState, x: Tensor) -> tuple[Tensor, UpdateResult]:
        """Measure the surprise of inputs ``x`` ``(n, d)`` under the current memory, then write
        them, projecting them once: ``(surprise (n,), update)`` equal to :meth:`surprise` followed
        by :meth:`update`."""
        x = self._check_x(x)
        k, v, _ = self.project(x)
        pred = self.apply_memory(self.effective_weights(state), k)
        surprise = ((pred - v) ** 2).sum(-1) / ((v * v).sum(-1) + _EPS)
        return surprise, self.update(state, x, kv=(k, v))

    def surprise(self, state: MemoryState, x: Tensor) -> Tensor:
        """Relative loss ``||M(k) - v||^2 / ||v||^2`` ``(n,)`` of inputs ``(n, d)`` under the current
        memory (the weights as of the last written token), without writing anything."""
        k, v, _ = self.project(x)
        pred = self.apply_memory(self.effective_weights(state), k)
        return ((pred - v) ** 2).sum(-1) / ((v * v).sum(-1) + _EPS)


# ---------------------------------------------------------------------- serialisation
# Blobs are safetensors (a JSON header and raw little-endian tensor bytes: nothing in them is ever
# executed) with a sha256 checksum of the tensors in the header's metadata, verified on load. Blobs
# written before the checksum existed (no "sha256" key) still load.
_STATE_FORMAT = "titans-agent-memory-state"
_PARAMS_FORMAT = "titans-agent-memory-params"
_MAX_HEADER_BYTES = 100 * 1024 * 1024  # safetensors' own limit on the JSON header


def tensors_digest(tensors: dict[str, Tensor]) -> str:
    """sha256 (hex) over the tensors in name order: each one's name, dtype, shape and raw bytes.

    Args:
        tensors: name -> CPU tensor.
    """
    h = hashlib.sha256()
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        h.update(f"{name}\0{str(t.dtype).removeprefix('torch.')}\0{tuple(t.shape)}\0".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _save(tensors: dict[str, Tensor], fmt: str) -> bytes:
    """safetensors bytes with a canonical header: safetensors writes the ``__metadata__`` keys in
    the order of a hash map (it varies between calls), so the header's JSON is written again with
    sorted keys (padded with spaces to a multiple of 8 bytes, as safetensors pads it). Equal tensors
    then give equal bytes, whichever process serialised them."""
    meta = {"format": fmt, "version": "1", "sha256": tensors_digest(tensors)}
    data = st_save(tensors, metadata=meta)
    n = int.from_bytes(data[:8], "little")
    header = json.dumps(json.loads(data[8 : 8 + n]), sort_keys=True, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    return len(header).to_bytes(8, "little") + header + data[8 + n :]


def blob_metadata(data: bytes) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors blob, read from its JSON header alone.

    Raises:
        CorruptBlobError: ``data`` is not bytes, is truncated, or its header is not safetensors JSON.
    """
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CorruptBlobError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < 8:
        raise CorruptBlobError(f"blob of {len(data)} bytes is too short to be safetensors")
    n = int.from_bytes(data[:8], "little")
    if n > min(len(data) - 8, _MAX_HEADER_BYTES):
        raise CorruptBlobError(f"safetensors header of {n} bytes does not fit in a blob of {len(data)} bytes")
    try:
        header = json.loads(data[8 : 8 + n].decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise CorruptBlobError(f"safetensors header is not JSON: {exc}") from exc
    meta = header.get("__metadata__", {}) if isinstance(header, dict) else None
    if not isinstance(meta, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in meta.items()):
        raise CorruptBlobError("safetensors header or its metadata is not a JSON object of strings")
    return meta


def _load(data: bytes, fmt: str, what: str) -> dict[str, Tensor]:
    """Parse a blob of format ``fmt`` and verify its checksum (when it has one)."""
    meta = blob_metadata(data)
    if meta.get("format", fmt) != fmt:
        raise CorruptBlobError(f"{what}: blob holds {meta['format']!r}, expected {fmt!r}")
    try:
        tensors = st_load(bytes(data))
    except Exception as exc:  # safetensors raises its own error types (SafetensorError, ...)
        raise CorruptBlobError(f"{what}: not a valid safetensors blob: {exc}") from exc
    expected = meta.get("sha256")
    if expected is None:
        log.debug("%s blob has no checksum (written by an older titans-agent)", what)
    elif tensors_digest(tensors) != expected:
        raise CorruptBlobError(f"{what}: checksum mismatch, the blob is corrupted or was altered")
    return tensors


def state_to_bytes(state: MemoryState) -> bytes:
    """Serialise a state with safetensors (bit-exact; never pickle), with a sha256 checksum of the
    tensors in the header metadata (key ``sha256``).

    Tensors: ``weight.{i}``, ``momentum.{i}`` (one per layer), ``pending`` ``(r, d)``, ``step`` ``(1,)``
    int64.

    Raises:
        NonFiniteStateError: the state holds a NaN or Inf; it is never serialised.
    """
    if not state.is_finite():
        raise NonFiniteStateError("refusing to serialise a non-finite memory state")
    tensors: dict[str, Tensor] = {}
    for i, (w, s) in enumerate(zip(state.weights, state.momentum)):
        tensors[f"weight.{i}"] = w.detach().contiguous().cpu()
        tensors[f"momentum.{i}"] = s.detach().contiguous().cpu()
    tensors["pending"] = state.pending.detach().contiguous().cpu()
    tensors["step"] = torch.tensor([state.step], dtype=torch.int64)
    return _save(tensors, _STATE_FORMAT)


def _check_state_tensors(tensors: dict[str, Tensor]) -> int:
    """Check names, dtypes and shapes of a state's tensors; return the number of layers."""
    n = sum(1 for key in tensors if key.startswith("weight."))
    names = {f"{p}.{i}" for p in ("weight", "momentum") for i in range(n)} | {"pending", "step"}
    if n == 0 or set(tensors) != names:
        raise CorruptBlobError(f"memory state has tensors {sorted(tensors)[:8]}, expected {sorted(names)}")
    step = tensors["step"]
    if step.dtype != torch.int64 or tuple(step.shape) != (1,) or int(step[0]) < 0:
        raise CorruptBlobError("memory state step must be one non-negative int64")
    ws = [tensors[f"weight.{i}"] for i in range(n)]
    pending = tensors["pending"]
    floats = (torch.float32, torch.float64)
    for i, w in enumerate(ws):
        m = tensors[f"momentum.{i}"]
        if w.dim() != 2 or w.dtype not in floats or m.shape != w.shape or m.dtype != w.dtype:
            raise CorruptBlobError(f"memory state layer {i} has inconsistent weight/momentum shapes or dtypes")
        if i and w.shape[1] != ws[i - 1].shape[0]:
            raise CorruptBlobError(f"memory state layer {i} does not chain with layer {i - 1}")
    d = ws[0].shape[1]
    if ws[-1].shape[0] != d or pending.dim() != 2 or pending.shape[1] != d or pending.dtype != ws[0].dtype:
        raise CorruptBlobError(f"memory state shapes do not describe a memory of width {d}")
    return n


def state_from_bytes(data: bytes, device: str | torch.device = "cpu") -> MemoryState:
    """Inverse of :func:`state_to_bytes`: parse (safetensors only), verify the checksum when the
    blob has one (blobs from before the checksum load unverified), and check the tensors' names,
    dtypes and shapes are those of a memory state.

    Raises:
        CorruptBlobError: truncated, corrupted, crafted or not a memory state (also an
            ``InvalidInputError`` and a ``StoreError``).
        NonFiniteStateError: the stored state is not finite.
    """
    tensors = _load(data, _STATE_FORMAT, "memory state")
    n = _check_state_tensors(tensors)
    dev = resolve_device(device)
    state = MemoryState(
        weights=tuple(tensors[f"weight.{i}"].to(dev) for i in range(n)),
        momentum=tuple(tensors[f"momentum.{i}"].to(dev) for i in range(n)),
        pending=tensors["pending"].to(dev),
        step=int(tensors["step"][0]),
    )
    if not state.is_finite():
        raise NonFiniteStateError("the stored memory state is not finite")
    return state


def params_to_bytes(memory: NeuralMemory) -> bytes:
    """Serialise the outer parameters (projections, gates, M_0) with safetensors and a sha256
    checksum (metadata key ``sha256``)."""
    tensors = {name: p.detach().contiguous().cpu() for name, p in memory.state_dict().items()}
    return _save(tensors, _PARAMS_FORMAT)


def params_from_bytes(memory: NeuralMemory, data: bytes) -> None:
    """Load outer parameters saved by :func:`params_to_bytes` into ``memory`` (in place), after
    verifying the checksum when the blob has one.

    Raises:
        CorruptBlobError: truncated, corrupted or crafted blob, or parameters whose names, shapes
            or dtypes do not match the module (also an ``InvalidInputError``).
    """
    tensors = _load(data, _PARAMS_FORMAT, "memory parameters")
    expected = memory.state_dict()
    if set(tensors) != set(expected) or any(
        tensors[k].shape != v.shape or tensors[k].dtype != v.dtype for k, v in expected.items()
    ):
        raise CorruptBlobError("stored memory parameters do not match the configuration (names, shapes or dtypes)")
    try:
        memory.load_state_dict(tensors, strict=True)
    except (RuntimeError, ValueError) as exc:
        raise CorruptBlobError(f"stored memory parameters do not match the configuration: {exc}") from exc
