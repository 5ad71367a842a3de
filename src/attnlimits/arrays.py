"""Where the row-block kernels compute (analysis.all_rows.device): numpy, or torch on a device.

The kernels of :mod:`attnlimits.protocol` are written once, against a namespace ``xp`` that
holds the numpy functions they call. For ``numpy`` it is numpy itself (:data:`NUMPY`); for a
torch device it is a :class:`TorchNamespace`, which gives those same names numpy's meaning on
float64 torch tensors of that device. The few numpy operations without a torch twin of the same
name and meaning (a partition, a stable sort, put_along_axis) are small methods of both
namespaces. torch is imported only when a torch device is asked for, so planning and numpy jobs
never import it.

Results match numpy to rounding (tests/test_torch_rows.py holds them to 1e-10 relative):
products are summed in another order, so a weight that ties another exactly in one namespace
ties it in the other only when both come from the same weights; rows computed from q and k in
two namespaces may order keys of weights within an ulp of each other differently.
"""

from __future__ import annotations

import contextlib
import re
from typing import Any

import numpy as np

DEVICE_PATTERN = re.compile(r"^(numpy|cpu|cuda(:[0-9]+)?)$")
DEFAULT_DEVICE = "numpy"


def to_numpy(a: Any) -> np.ndarray:
    """A numpy array of ``a``, a numpy array or a torch tensor of any device (no torch import)."""
    if hasattr(a, "detach"):
        return a.detach().cpu().numpy()
    return np.asarray(a)


def host(values: dict[str, Any]) -> dict[str, np.ndarray]:
    """A kernel's dict of arrays, each as a numpy array: where the jobs' numpy code takes over."""
    return {name: to_numpy(v) for name, v in values.items()}


class NumpyNamespace:
    """numpy itself (any attribute is numpy's), with the adapters the kernels share with torch."""

    name = "numpy"

    def __getattr__(self, attr: str) -> Any:
        return getattr(np, attr)

    def asarray(self, a, dtype=None) -> np.ndarray:
        return np.asarray(a, dtype=dtype)

    def to_numpy(self, a) -> np.ndarray:
        return np.asarray(a)

    def astype(self, a: np.ndarray, dtype) -> np.ndarray:
        return a.astype(dtype)  # np.astype is numpy >= 2 only; the analysis env allows 1.26

    def kth_smallest(self, a: np.ndarray, k: int) -> np.ndarray:
        """Each row's k-th smallest entry (0-based), shape (R, 1)."""
        return np.partition(a, k, axis=1)[:, k : k + 1]

    def smallest_k(self, a: np.ndarray, k: int) -> np.ndarray:
        """Indices of each row's k smallest entries, in no particular order, (R, k)."""
        return np.argpartition(a, k - 1, axis=1)[:, :k]

    def argsort_rows(self, a: np.ndarray, *, stable: bool = True) -> np.ndarray:
        return np.argsort(a, axis=1, kind="stable" if stable else None)

    def scatter_rows(self, out: np.ndarray, index: np.ndarray, values: np.ndarray) -> np.ndarray:
        """out[r, index[r, j]] = values[r, j], in place; returns out."""
        np.put_along_axis(out, index, values, 1)
        return out

    def putmask(self, a: np.ndarray, mask: np.ndarray, value: float) -> None:
        np.putmask(a, mask, value)

    def clip_below(self, a: np.ndarray, floor: float) -> np.ndarray:
        """max(a, floor) in place; returns a."""
        return np.maximum(a, floor, out=a)

    def amax(self, a, axis=None, keepdims=False, initial=None):
        if initial is None:
            return np.max(a, axis=axis, keepdims=keepdims)
        return np.max(a, axis=axis, keepdims=keepdims, initial=initial)

    def copy(self, a: np.ndarray) -> np.ndarray:
        return a.copy()

    def exp_above(self, z: np.ndarray, floor: float) -> np.ndarray:
        """exp(z) where z >= floor, else exactly 0 (never computed: subnormals are slow)."""
        return np.exp(z, where=z >= floor, out=np.zeros_like(z))

    def row_norms(self, a: np.ndarray) -> np.ndarray:
        return np.linalg.norm(a, axis=1)

    def errstate(self, **kwargs):
        return np.errstate(**kwargs)


NUMPY = NumpyNamespace()


class TorchNamespace:
    """numpy's names and meanings on torch tensors of one device (those the kernels use)."""

    def __init__(self, device: str):
        try:
            import torch
        except ImportError as error:
            raise RuntimeError(
                f"analysis.all_rows.device: {device!r} runs the rows in torch, which this "
                "environment lacks (workflow/envs/analysis.yaml has none): install torch "
                "here, or set the device to numpy"
            ) from error

        if device.startswith("cuda") and not torch.cuda.is_available():
            raise RuntimeError(
                f"analysis.all_rows.device: {device!r} asks for CUDA, but this torch "
                f"({torch.__version__}) sees no CUDA device; use cpu or numpy here"
            )
        self.torch = torch
        self.device = torch.device(device)
        self.name = f"torch:{self.device}"
        self.float64, self.int64, self.int32, self.intp = (
            torch.float64,
            torch.int64,
            torch.int32,
            torch.int64,
        )
        self.bool_ = torch.bool
        self.nan, self.inf = float("nan"), float("inf")
        self.newaxis = None
        # elementwise functions whose torch meaning is numpy's
        self.sqrt, self.exp, self.tanh, self.einsum = (
            torch.sqrt,
            torch.exp,
            torch.tanh,
            torch.einsum,
        )
        self.isnan, self.isfinite, self.stack = torch.isnan, torch.isfinite, torch.stack
        self.divide = torch.divide

    _DTYPES = {
        np.dtype(np.float64): "float64",
        np.dtype(np.int64): "int64",
        np.dtype(np.int32): "int32",
        np.dtype(np.bool_): "bool",
    }

    def _dtype(self, dtype):
        if dtype is None or isinstance(dtype, self.torch.dtype):
            return dtype
        if dtype is bool:
            return self.torch.bool
        return getattr(self.torch, self._DTYPES[np.dtype(dtype)])

    def asarray(self, a, dtype=None):
        if isinstance(a, np.ndarray) and not a.flags.writeable:
            a = np.array(a)  # a memory-mapped pack: torch wants a writeable buffer
        return self.torch.as_tensor(a, dtype=self._dtype(dtype), device=self.device)

    def to_numpy(self, a) -> np.ndarray:
        return to_numpy(a)

    def astype(self, a, dtype):
        return a.to(self._dtype(dtype))

    def arange(self, *args, dtype=None):
        return self.torch.arange(
            *args, dtype=self._dtype(dtype) or self.torch.int64, device=self.device
        )

    @staticmethod
    def _shape(shape) -> tuple[int, ...]:
        return (shape,) if isinstance(shape, int) else tuple(shape)

    def zeros(self, shape, dtype=float):
        return self.torch.zeros(
            self._shape(shape), dtype=self._dtype(dtype) or self.float64, device=self.device
        )

    def empty(self, shape, dtype=float):
        return self.torch.empty(
            self._shape(shape), dtype=self._dtype(dtype) or self.float64, device=self.device
        )

    def full(self, shape, value, dtype=None):
        dtype = self._dtype(dtype) or (self.float64 if isinstance(value, float) else None)
        return self.torch.full(self._shape(shape), value, dtype=dtype, device=self.device)

    def full_like(self, a, value):
        return self.torch.full_like(a, value)

    def empty_like(self, a):
        return self.torch.empty_like(a)

    def where(self, condition, a, b):
        return self.torch.where(condition, self._operand(a), self._operand(b))

    def _operand(self, a):
        if isinstance(a, self.torch.Tensor):
            return a
        if isinstance(a, bool | int | float):
            return self.torch.tensor(
                a, device=self.device, dtype=None if isinstance(a, bool) else self.float64
            )
        return self.asarray(a)

    def maximum(self, a, b):
        if not isinstance(b, self.torch.Tensor):
            return self.torch.clamp(a, min=b)
        return self.torch.maximum(a, b)

    def clip_below(self, a, floor: float):
        return a.clamp_(min=floor)

    def amax(self, a, axis=None, keepdims=False, initial=None):
        if a.numel() == 0:
            shape = list(a.shape)
            if axis is None:
                return self.torch.tensor(initial, dtype=a.dtype, device=self.device)
            if keepdims:
                shape[axis] = 1
            else:
                del shape[axis]
            return self.torch.full(shape, initial, dtype=a.dtype, device=self.device)
        out = self.torch.amax(a) if axis is None else self.torch.amax(a, dim=axis, keepdim=keepdims)
        return out if initial is None else self.torch.clamp(out, min=initial)

    def amin(self, a, axis):
        return self.torch.amin(a, dim=axis)

    def nonzero(self, a):
        return self.torch.nonzero(a, as_tuple=True)

    def count_nonzero(self, a, axis=None):
        return self.torch.count_nonzero(a, dim=axis)

    def cumsum(self, a, axis):
        return self.torch.cumsum(a, dim=axis)

    def broadcast_to(self, a, shape):
        return self.torch.broadcast_to(a, shape)

    def take_along_axis(self, a, index, axis):
        return self.torch.take_along_dim(a, index, dim=axis)

    def kth_smallest(self, a, k: int):
        return self.torch.kthvalue(a, k + 1, dim=1, keepdim=True).values

    def smallest_k(self, a, k: int):
        return self.torch.topk(a, k, dim=1, largest=False).indices

    def argsort_rows(self, a, *, stable: bool = True):
        return self.torch.argsort(a, dim=1, stable=stable)

    def scatter_rows(self, out, index, values):
        return out.scatter_(1, index, values)

    def putmask(self, a, mask, value: float) -> None:
        a.masked_fill_(mask, value)

    def copy(self, a):
        return a.clone()

    def exp_above(self, z, floor: float):
        return self.torch.where(z >= floor, self.torch.exp(z), 0.0)

    def row_norms(self, a):
        return self.torch.linalg.vector_norm(a, dim=1)

    def argmax(self, a, axis):
        return self.torch.argmax(a, dim=axis)  # the first of equal maxima, as numpy's

    def minimum(self, a, b):
        if not isinstance(b, self.torch.Tensor):
            return self.torch.clamp(a, max=b)
        return self.torch.minimum(a, b)

    def errstate(self, **kwargs):
        return contextlib.nullcontext()  # torch does not warn on inf / nan


def check_device(device: str) -> str:
    """``device`` if it is one analysis.all_rows.device accepts (numpy | cpu | cuda[:i])."""
    if not DEVICE_PATTERN.match(device):
        raise ValueError(f"a device is numpy, cpu or cuda[:i], got {device!r}")
    return device


def namespace(device: str = DEFAULT_DEVICE) -> NumpyNamespace | TorchNamespace:
    """The namespace of ``device``: numpy (no torch import) or torch on cpu / cuda[:i]."""
    return NUMPY if check_device(device) == "numpy" else TorchNamespace(device)
