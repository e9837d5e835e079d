"""Building what a run needs, in one place: the device, the data through its registered source, and the
method with its encoders sized from the data. Training (:mod:`harness.run.runner`) builds from a task
spec; rebuilding a finished run (:mod:`harness.analysis.restore`) builds from the resolved configuration a
result file holds; both end in :func:`assemble`."""
from __future__ import annotations

import dataclasses
import math
from typing import Any

import torch

from harness.config import params as P
from harness.config.registry import ENCODERS, METHODS, SOURCES, Registry
from harness.config.spec import MODALITIES, TaskSpec
from harness.data.paired import PairedData
from harness.errors import ConfigError, did_you_mean
from harness.method import Method

MethodEntry = tuple[type[Method], Any]  # a method's class and its validated Params


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
    data: PairedData = SOURCES.get(spec.dataset.kind).load(spec.dataset.params)
    return data


def component(registry: Registry[type[Any]], body: dict[str, Any], type_key: str, where: str,
              drop: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """(registered class, validated Params) of a resolved config entry such as {"type": "mlp", "dim": 5}."""
    body = {k: v for k, v in body.items() if k not in drop}
    if type_key not in body:
        raise ConfigError(f"{where} has no {type_key!r} key; is this a result file of `python -m harness run`?")
    cls = registry.get(body.pop(type_key), where)
    return cls, P.parse(cls.Params, body, where)


AUTO = "auto"
AUTO_WIDTH_FLOOR = 64  # an auto embedding narrower than this only when both inputs are
AUTO_WIDTH_CAP = 1024  # and never wider than this (Sinkhorn, queues and prototypes grow with it)


def auto_width(shapes: dict[str, tuple[int, ...]]) -> int:
    """The embedding width an encoder with ``dim: auto`` takes for inputs of ``shapes`` (modality -> item shape):
    the narrower input's width, so that neither modality is squeezed and a linear map between equal widths can
    start as the identity; raised to 64 where the wider input has that many (10-d topic proportions against
    128-d histograms embed in 64), and capped at 1,024."""
    widths = sorted(math.prod(shape) for shape in shapes.values())
    width = widths[0] if widths[0] >= AUTO_WIDTH_FLOOR else min(AUTO_WIDTH_FLOOR, widths[-1])
    return max(1, min(width, AUTO_WIDTH_CAP))


def settle(method: MethodEntry, encoders: dict[str, tuple[Any, Any]], data: PairedData, batch_size: int,
           where: str) -> tuple[MethodEntry, dict[str, tuple[Any, Any]], dict[str, Any]]:
    """``method`` and ``encoders`` (class, params) with every ``auto`` setting replaced by the value the data give
    it: an encoder's ``dim: auto`` by :func:`auto_width`, a method's by its ``settle`` (SwAMP's K and queue from the
    number of training pairs). Also returns those values by resolved-config key (``encoders.a.dim``,
    ``method.K``), for the result file and the run's first lines."""
    resolved: dict[str, Any] = {}
    shapes = data.input_shapes()
    out = {}
    for modality, (cls, params) in encoders.items():
        if getattr(params, "dim", None) == AUTO:
            params = dataclasses.replace(params, dim=auto_width(shapes))
            resolved[f"encoders.{modality}.dim"] = params.dim
        out[modality] = (cls, params)
    method_cls, params = method
    settled = method_cls.settle(params, data["train"].n_pairs, batch_size)
    if settled is not params:
        before, after = P.as_dict(params), P.as_dict(settled)
        resolved.update({f"method.{k}": v for k, v in after.items() if before[k] != v})
        check = getattr(settled, "check", None)
        if check is not None:
            check(f"{where}: methods.{method_cls.registry_name} (with its auto settings resolved)")
    return (method_cls, settled), out, resolved


def _settle_spec(spec: TaskSpec, name: str, data: PairedData) -> tuple[MethodEntry,
                                                                     dict[str, tuple[Any, Any]], dict[str, Any]]:
    """:func:`settle` of method ``name`` of ``spec`` and the task's encoders."""
    m = spec.methods[name]
    encoders = {mod: (ENCODERS.get(c.kind), c.params) for mod, c in spec.encoders.items()}
    return settle((METHODS.get(m.method), m.params), encoders, data, m.train.batch_size, str(spec.path))


def settled_params(spec: TaskSpec, name: str, data: PairedData) -> Any:
    """The params of method ``name`` with its ``auto`` settings resolved for ``data``."""
    return _settle_spec(spec, name, data)[0][1]


def resolved_settings(spec: TaskSpec, name: str, data: PairedData) -> dict[str, Any]:
    """The values the ``auto`` settings of method ``name`` take on ``data`` (empty when it has none)."""
    return _settle_spec(spec, name, data)[2]


def assemble(method: MethodEntry, encoders: dict[str, tuple[Any, Any]], data: PairedData,
             device: torch.device, where: str, batch_size: int) -> Method:
    """Encoders (class, params) per modality sized from ``data`` (with the data's fixed weights frozen in),
    wrapped by the method (class, params), on ``device``; ``auto`` settings take the values :func:`settle` gives
    them for ``data`` trained in batches of ``batch_size``."""
    method, encoders, _ = settle(method, encoders, data, batch_size, where)
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
    return assemble((METHODS.get(m.method), m.params), encoders, data, device, str(spec.path), m.train.batch_size)


def build_from_config(config: dict[str, Any], data: PairedData, device: torch.device, where: str) -> Method:
    """The method a result file's resolved ``config`` describes (encoders and method sections), for ``data``."""
    method = component(METHODS, config["method"], "method", f"{where}: config.method", drop=("name",))
    encoders = {m: component(ENCODERS, config["encoders"][m], "type", f"{where}: config.encoders.{m}")
                for m in MODALITIES}
    return assemble(method, encoders, data, device, where, int((config.get("train") or {}).get("batch_size", 128)))


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
