"""What a result file says of the hardware and libraries that shape its numbers, the same facts of the machine at
hand, and the differences between the two (``rerun`` warns of them, ``rerun --check`` explains by them)."""
from __future__ import annotations

from typing import Any

import torch


def hardware_of(record: dict[str, Any]) -> dict[str, Any]:
    """What a result file says of the hardware and libraries that shape its numbers: CPU model and vector
    extensions, GPU, torch and numpy versions (fields a file does not record are left out)."""
    env = record.get("environment") or {}
    hw, versions = env.get("hardware") or {}, env.get("versions") or {}
    facts = {"CPU": hw.get("cpu"), "vector extensions": hw.get("cpu_flags"),
             "GPU": (hw.get("gpu") or {}).get("name") if hw.get("device", "cpu") != "cpu" else None,
             "torch": versions.get("torch"), "numpy": versions.get("numpy")}
    return {k: v for k, v in facts.items() if v is not None}


def this_machine(device: str) -> dict[str, Any]:
    """:func:`hardware_of` for the machine at hand."""
    import numpy

    from harness.store import provenance

    facts: dict[str, Any] = {"CPU": provenance.cpu_model(), "vector extensions": provenance.cpu_flags(),
                             "torch": torch.__version__, "numpy": numpy.__version__}
    if device.startswith("cuda") and torch.cuda.is_available():
        facts["GPU"] = torch.cuda.get_device_name()
    return facts


def hardware_differences(record: dict[str, Any], here: dict[str, Any]) -> list[str]:
    """'CPU: Intel(R) Xeon(R) Processor -> AMD EPYC', one per fact the file records that differs here."""
    return [f"{k}: {_short(v)} -> {_short(here.get(k))}" for k, v in hardware_of(record).items()
            if k in here and here[k] != v]


def _short(value: Any) -> str:
    return " ".join(value) if isinstance(value, list) else str(value)
