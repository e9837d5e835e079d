"""Numeric precision of a run (``train.precision``): fp32, tf32 or bf16, applied from outside the loops.

* ``fp32`` (default, as the paper): TF32 off for CUDA matmuls and cuDNN, no autocast.
* ``tf32``: TF32 tensor cores allowed for CUDA matmuls and cuDNN (GRU, convolutions);
  nothing changes on a CPU.
* ``bf16``: forward passes under ``torch.autocast`` with bfloat16 on the run's device
  type; backward, optimizer and ranking stay outside autocast, as PyTorch recommends.

On a CPU, bf16 is computed natively only with ``avx512_bf16`` or ``amx_bf16``; elsewhere it is emulated and
slow, which :func:`cpu_warning` says in one line before anything trains.

The training step is wrapped by its caller (:func:`wrap_step` around the whole step for the
TF32 switches, :func:`wrap_forward` around the loss function for autocast), and validation
and test retrieval run inside :func:`scope`; the training loop itself knows nothing of it.
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, Sequence

import torch

PRECISIONS = ("fp32", "tf32", "bf16")

# the CPU flags (as /proc/cpuinfo names them) of the instructions that compute a 16-bit precision natively
NATIVE_CPU_FLAGS: dict[str, tuple[str, ...]] = {"bf16": ("avx512_bf16", "amx_bf16")}
# flags of an x86 CPU; elsewhere (ARM) the recorded flags do not tell whether bf16 is native, and nothing is said
X86_FLAGS = ("sse4_2", "avx", "avx2")
FP32_SETTING = "--set train.precision=fp32 (or train.precision: fp32 in the task file)"


def cpu_warning(precision: str, device_type: str, cpu: str, flags: Sequence[str],
                setting: str = FP32_SETTING) -> str | None:
    """The warning (without its ``warning:`` prefix) for ``precision`` asked of a CPU whose vector extensions are
    ``flags`` (as :func:`harness.store.provenance.cpu_flags` records them) when the CPU lacks the instructions that
    compute it natively, naming the precision it does run natively (fp32) and the ``setting`` that asks for it;
    None on another device, for a precision every CPU runs natively, or where the flags are not an x86 CPU's
    (unknown: nothing is said)."""
    needs = NATIVE_CPU_FLAGS.get(precision)
    if device_type != "cpu" or needs is None or not any(f in flags for f in X86_FLAGS):
        return None
    if any(f in flags for f in needs):
        return None
    return (f"train.precision {precision} on the CPU {cpu} (vector extensions: {', '.join(flags)}): it has no "
            f"{' or '.join(needs)}, so {precision} is emulated there and slow; this CPU runs fp32 natively: "
            f"{setting}")


@contextlib.contextmanager
def tf32_switches(enabled: bool) -> Iterator[None]:
    """CUDA matmul and cuDNN TF32 switches set to ``enabled`` over the block, restored afterwards."""
    matmul, cudnn = torch.backends.cuda.matmul, torch.backends.cudnn
    before = (matmul.allow_tf32, cudnn.allow_tf32)
    matmul.allow_tf32 = cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = before


def autocast(precision: str, device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """bfloat16 autocast on ``device``'s type for ``bf16``; a no-op context otherwise."""
    if precision == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@contextlib.contextmanager
def scope(precision: str, device: torch.device) -> Iterator[None]:
    """Everything ``precision`` asks for (TF32 switches and autocast): for forward-only work such as
    validation and test retrieval."""
    with tf32_switches(precision == "tf32"), autocast(precision, device):
        yield


def _wrapped(fn: Callable[..., Any],
             context: Callable[[], contextlib.AbstractContextManager[Any]]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        with context():
            return fn(*args, **kwargs)

    return call


def wrap_step(step: Callable[..., Any], precision: str) -> Callable[..., Any]:
    """``step`` run with the TF32 switches of ``precision`` (they must cover the backward pass too)."""
    return _wrapped(step, lambda: tf32_switches(precision == "tf32"))


def wrap_forward(loss_fn: Callable[..., Any], precision: str, device: torch.device) -> Callable[..., Any]:
    """``loss_fn`` (the forward pass) run under the autocast of ``precision``; unchanged for fp32 and tf32."""
    if precision != "bf16":
        return loss_fn
    return _wrapped(loss_fn, lambda: autocast(precision, device))
