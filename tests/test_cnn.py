"""The cnn encoder: torchvision backbones built without downloads, local weights, attention, shapes."""
from __future__ import annotations

import pytest
import torch
from torchvision import models

from harness.config.params import parse
from harness.encoders.cnn import CNN, CNNParams, SpatialAttention
from harness.errors import ConfigError


def build(shape=(3, 32, 32), **kw):
    return CNN.build(shape, parse(CNNParams, kw, "encoders.a"))


@pytest.fixture(autouse=True)
def no_downloads(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the encoder tried to download weights")
    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", refuse)


@pytest.mark.parametrize("arch, shape", [("small", (1, 24, 24)), ("resnet18", (3, 32, 32)), ("resnet18", (1, 32, 32)),
                                         ("vgg16", (3, 32, 32))])
def test_every_arch_maps_images_to_dim(arch, shape):
    encoder = build(shape, arch=arch, dim=7, widths=[4, 8]).eval()
    with torch.no_grad():
        assert encoder(torch.randn(2, *shape)).shape == (2, 7)
    assert encoder.out_dim == 7


def test_local_weights_are_loaded_and_checked(tmp_path):
    torch.manual_seed(3)
    reference = models.resnet18(weights=None)
    path = tmp_path / "resnet18.pth"
    torch.save(reference.state_dict(), path)
    encoder = build(arch="resnet18", weights=str(path))
    assert torch.equal(encoder.features[0].weight, reference.conv1.weight)
    torch.save({"conv1.weight": torch.zeros(1)}, tmp_path / "bad.pth")
    with pytest.raises(ConfigError, match="do not fit torchvision's resnet18"):
        build(arch="resnet18", weights=str(tmp_path / "bad.pth"))
    with pytest.raises(ConfigError, match="cannot read encoder weights"):
        build(arch="resnet18", weights=str(tmp_path / "missing.pth"))


def test_bad_settings_fail_where_they_enter():
    with pytest.raises(ConfigError, match="did you mean|unknown; valid"):
        build(arch="vgg19")
    with pytest.raises(ConfigError, match="expects images"):
        build((300,), arch="small")
    with pytest.raises(ConfigError, match="no published weights"):
        build(arch="small", weights="x.pth")


@pytest.mark.parametrize("arch, widths, smallest",
                         [("small", [4, 8, 16, 32], 16), ("small", [4], 2), ("vgg16", [4], 32)])
def test_images_too_small_for_the_pooling_are_refused_at_build(arch, widths, smallest):
    """Each 2x2 max-pool halves the image; one pixel fewer than the pools need leaves nothing for the last layer
    (found by fuzzing: a 12-pixel TU-Berlin image through four pools), the exact size still runs."""
    with pytest.raises(ConfigError, match=rf"halves its input .* use dataset.image_size >= {smallest}"):
        build((3, smallest - 1, smallest), arch=arch, widths=widths)
    encoder = build((3, smallest, smallest), arch=arch, dim=5, widths=widths).eval()
    with torch.no_grad():
        assert encoder(torch.randn(2, 3, smallest, smallest)).shape == (2, 5)


@torch.no_grad()
def test_attention_adds_the_softmax_weighted_map():
    att = SpatialAttention(2, 3)
    x = torch.randn(1, 2, 3, 3)
    mask = torch.softmax(att.net(x).flatten(1), dim=1).view(1, 1, 3, 3)
    assert torch.allclose(att(x), x * (1 + mask))
    assert float(mask.sum()) == pytest.approx(1.0)


def test_attention_is_off_unless_asked_as_in_doodle2search():
    from torch import nn

    assert isinstance(build(arch="small", widths=[4, 8]).attention, nn.Identity)
    assert isinstance(build(arch="small", widths=[4, 8], attention=True).attention, SpatialAttention)
