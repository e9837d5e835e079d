"""Image encoders: a torchvision backbone (VGG-16 as Doodle2Search, ResNet) or a small CNN for CPU runs,
optional spatial attention on the last feature map, and a linear projection to ``dim``.

Nothing is downloaded: torchvision models are built with ``weights=None`` and, when ``weights``
names a local file (a torchvision state dict such as ``vgg16_bn-6c64b313.pth``), loaded from
it; otherwise they start from random initialisation. The resolved configuration in every
result file records the ``weights`` path ('' = random initialisation).

Attention (Doodle2Search, off by default as there): a mask m = softmax over the H·W positions of conv1×1(conv1×1(x)),
then x + x·m, keeping the feature map's shape.
"""
from __future__ import annotations

import pickle
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torchvision import models

from harness.api import ENCODERS, ConfigError, require

VGG = ("vgg16", "vgg16_bn")
RESNET = ("resnet18", "resnet34", "resnet50")
ARCHS = (*VGG, *RESNET, "small")


@dataclass(frozen=True)
class CNNParams:
    arch: str = "resnet18"
    dim: int = 256
    weights: str = ""  # a local torchvision state-dict file; '' = random initialisation
    attention: bool = False  # Doodle2Search's default (its --attn turns it on)
    attention_hidden: int = 380
    widths: tuple[int, ...] = (32, 64, 128, 256)  # arch 'small': channels of its conv blocks

    def check(self, where: str) -> None:
        require(self.arch in ARCHS, where, f"arch {self.arch!r} unknown; valid: {', '.join(ARCHS)}")
        require(self.dim > 0 and self.attention_hidden > 0, where, "dim and attention_hidden must be positive")
        require(len(self.widths) > 0 and min(self.widths) > 0, where, "widths must be positive channel counts")
        require(not (self.weights and self.arch == "small"), where,
                "arch 'small' has no published weights; leave weights empty or pick a torchvision arch")


class SpatialAttention(nn.Module):
    """Doodle2Search's attention: (B, C, H, W) -> x + x·softmax_HW(conv1×1(conv1×1(x)))."""

    def __init__(self, channels: int, hidden: int):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(channels, hidden, 1), nn.Conv2d(hidden, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, h, w = x.shape
        mask = torch.softmax(self.net(x).view(b, h * w), dim=1).view(b, 1, h, w)  # (B, 1, H, W)
        return x + x * mask


def small_backbone(in_channels: int, widths: tuple[int, ...]) -> nn.Sequential:
    """Conv3×3–BN–ReLU–max-pool blocks, one per width: (B, in, H, W) -> (B, widths[-1], H/2^n, W/2^n)."""
    layers: list[nn.Module] = []
    for fan_in, fan_out in zip((in_channels, *widths[:-1]), widths):
        layers += [nn.Conv2d(fan_in, fan_out, 3, padding=1, bias=False), nn.BatchNorm2d(fan_out),
                   nn.ReLU(inplace=True), nn.MaxPool2d(2)]
    return nn.Sequential(*layers)


def load_weights(model: nn.Module, path: str, arch: str) -> None:
    """Load a local torchvision state dict into ``model``; a missing or mismatched file is a ConfigError."""
    file = Path(path).expanduser()
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except (OSError, EOFError, RuntimeError, pickle.UnpicklingError) as err:
        raise ConfigError(f"cannot read encoder weights {file}: {err}; give a local torchvision state-dict "
                          f"file for {arch}, or weights: '' for random initialisation") from err
    try:
        model.load_state_dict(state)
    except (RuntimeError, TypeError, AttributeError) as err:
        raise ConfigError(f"encoder weights {file} do not fit torchvision's {arch}: {err}") from err


class CNNEncoder(nn.Module):
    """(B, C, H, W) images -> (B, dim). One-channel input is repeated to three for torchvision archs."""

    def __init__(self, in_channels: int, p: CNNParams):
        super().__init__()
        self.rgb = p.arch != "small" and in_channels == 1
        self.features, self.head, channels = _backbone(in_channels, p)
        self.attention = SpatialAttention(channels, p.attention_hidden) if p.attention else nn.Identity()
        self.out_dim = p.dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.rgb:
            x = x.expand(-1, 3, -1, -1)
        out: torch.Tensor = self.head(self.attention(self.features(x)))  # (B, dim)
        return out


def _backbone(in_channels: int, p: CNNParams) -> tuple[nn.Module, nn.Module, int]:
    """(feature extractor, head to ``dim``, channels of the last feature map) for ``p.arch``."""
    if p.arch == "small":
        head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(p.widths[-1], p.dim))
        return small_backbone(in_channels, p.widths), head, p.widths[-1]
    model = getattr(models, p.arch)(weights=None)  # never downloads
    if p.weights:
        load_weights(model, p.weights, p.arch)
    if p.arch in VGG:  # Doodle2Search: VGG features, then the classifier with its last layer -> dim
        head = nn.Sequential(model.avgpool, nn.Flatten(), *list(model.classifier)[:-1], nn.Linear(4096, p.dim))
        return model.features, head, 512
    features = nn.Sequential(*list(model.children())[:-2])  # up to the last residual stage
    width = model.fc.in_features
    return features, nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(width, p.dim)), width


@ENCODERS.register("cnn")
class CNN:
    Params = CNNParams

    @staticmethod
    def build(input_shape: tuple[int, ...], p: CNNParams) -> nn.Module:
        if len(input_shape) != 3 or input_shape[0] not in (1, 3):
            raise ConfigError(f"encoder cnn expects images of shape (1 or 3, H, W), got {input_shape}")
        pools = len(p.widths) if p.arch == "small" else 5 if p.arch in VGG else 0  # each 2x2 max-pool halves
        if min(input_shape[1:]) < 2 ** pools:
            fewer = f" or fewer widths (now {len(p.widths)})" if p.arch == "small" else ""
            raise ConfigError(f"encoder cnn ({p.arch}) halves its input {pools} times, so images of "
                              f"{input_shape[1]}x{input_shape[2]} pixels vanish before its last layer; use "
                              f"dataset.image_size >= {2 ** pools}{fewer}")
        return CNNEncoder(input_shape[0], p)
