"""Building what a run needs, in one place: the device, the data through its registered source, and the
method with its encoders sized from the data. Training (:mod:`harness.run.runner`) builds from a task
spec; rebuilding a finished run (:mod:`harness.analysis.restore`) builds from the resolved configuration a
result file holds; both end in :func:`assemble`."""
from __future__ import annotations

from typing import Any

import torch

from harness.config import params as P
from harness.config.registry import ENCODERS, METHODS, SOURCES, Registry
from harness.config.spec import MODALITIES, TaskSpec
from harness.data.paired import PairedData
from harness.errors import ConfigError, did_you_mean
from harness.method import Method


def resolve_device(name: str) -> torch.device:
    """'auto' picks CUDA when present; an explicit CUDA device that is absent is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"--device {name!r} is not a device name{did_you_mean(name, ('auto', 'cpu', 'cuda'))}; "
                          "use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"--device {name}: CUDA is not available on this machine; use --device cpu")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ConfigError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA device(s); "
                          f"use cuda:0 to cuda:{torch.cuda.device_count() - 1}")
    if device.type not in ("cpu", "cuda"):
        raise ConfigError(f"--device {name}: only cpu and cuda are supported")
    return device


def load_source(spec: TaskSpec) -> PairedData:
    """The task's dataset, loaded through its registered source (unchecked: see
    :func:`harness.run.preflight.check_data`)."""
    return SOURCES.get(spec.dataset.kind).load(spec.dataset.params)


def component(registry: Registry, body: dict[str, Any], type_key: str, where: str,
              drop: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """(registered class, validated Params) of a resolved config entry such as {"type": "mlp", "dim": 5}."""
    body = {k: v for k, v in body.items() if k not in drop}
    if type_key not in body:
        raise ConfigError(f"{where} has no {type_key!r} key; is this a result file of `python -m harness run`?")
    cls = registry.get(body.pop(type_key), where)
    return cls, P.parse(cls.Params, body, where)


def assemble(method: tuple[type, Any], encoders: dict[str, tuple[Any, Any]], data: PairedData,
             device: torch.device, where: str) -> Method:
    """Encoders (class, params) per modality sized from ``data`` (with the data's fixed weights frozen in),
    wrapped by the method (class, params), on ``device``."""
    shapes = data.input_shapes()
    built = {m: cls.build(shapes[m], params) for m, (cls, params) in encoders.items()}
    widths = {m: getattr(enc, "out_dim", None) for m, enc in built.items()}
    if len({w for w in widths.values() if w is not None}) > 1:
        raise ConfigError(f"{where}: encoders disagree on the embedding size: "
                          f"{', '.join(f'{m}: {w}' for m, w in widths.items())}; give encoders.a and encoders.b the "
                          "same output size (dim)")
    for modality, weights in data.fixed_weights.items():
        fix_weights(built[modality], weights, f"{where}: encoders.{modality} ({encoders[modality][0].registry_name})")
    method_cls, method_params = method
    return method_cls.build(built, method_params, data).to(device)


def build_method(spec: TaskSpec, name: str, data: PairedData, device: torch.device) -> Method:
    """The method ``name`` of the task ``spec`` for ``data`` on ``device``."""
    m = spec.methods[name]
    encoders = {mod: (ENCODERS.get(c.kind), c.params) for mod, c in spec.encoders.items()}
    return assemble((METHODS.get(m.method), m.params), encoders, data, device, str(spec.path))


def build_from_config(config: dict[str, Any], data: PairedData, device: torch.device, where: str) -> Method:
    """The method a result file's resolved ``config`` describes (encoders and method sections), for ``data``."""
    method = component(METHODS, config["method"], "method", f"{where}: config.method", drop=("name",))
    encoders = {m: component(ENCODERS, config["encoders"][m], "type", f"{where}: config.encoders.{m}")
                for m in MODALITIES}
    return assemble(method, encoders, data, device, where)


def classes_of(spec: TaskSpec, name: str) -> list[type]:
    """The registered classes a run of method ``name`` executes: method, encoders and data source."""
    return [METHODS.get(spec.methods[name].method), *(ENCODERS.get(c.kind) for c in spec.encoders.values()),
            SOURCES.get(spec.dataset.kind)]


def fix_weights(encoder: torch.nn.Module, weights: dict[str, torch.Tensor], where: str) -> None:
    """Copy ``weights`` (parameter name -> tensor) into ``encoder`` and freeze those parameters."""
    own = dict(encoder.named_parameters())
    for key, value in weights.items():
        if key not in own or own[key].shape != value.shape:
            found = tuple(own[key].shape) if key in own else "no such parameter"
            raise ConfigError(f"{where} cannot take the data's fixed {key} {tuple(value.shape)} ({found}); "
                              "use an encoder with that table, e.g. word_dim equal to the word vectors' dimension")
        with torch.no_grad():
            own[key].copy_(value)
        own[key].requires_grad_(False)
