"""Options of ``run --launcher slurm``: from ``--slurm key=value,...`` and from a task file's ``launcher:``
section (``launcher: {slurm: {partition: gpu, ...}}``); the command line wins over the task file.

Only the names below are accepted, each with its type; anything else is a ConfigError naming the closest
valid option. ``cluster`` chooses submitit's executor: ``slurm`` (the default, sbatch), or, for tests and
development on a machine without SLURM, ``local`` (real subprocesses) and ``debug`` (in this process).
"""
from __future__ import annotations

import re
from typing import Any, Mapping

from harness.config.launchers import ARRAY_PARALLELISM, MAX_REQUEUE, TIMEOUT_MIN
from harness.errors import ConfigError, unknown

# name -> (type, what it sets)
SLURM_OPTIONS: dict[str, tuple[type, str]] = {
    "partition": (str, "SLURM partition (sbatch --partition)"),
    "account": (str, "account charged (sbatch --account)"),
    "qos": (str, "quality of service (sbatch --qos)"),
    "constraint": (str, "node features (sbatch --constraint)"),
    "nodes": (int, "nodes per run; more than one runs the run distributed (default 1)"),
    "gpus_per_node": (int, "GPUs per node; each drives one process of a distributed run (default 0: CPU)"),
    "cpus_per_task": (int, "CPU cores per process (default: SLURM's)"),
    "mem_gb": (int, "memory per node in GB (default: SLURM's)"),
    "timeout_min": (int, f"time limit of one job in minutes; a job that reaches it is requeued "
                         f"(default {TIMEOUT_MIN})"),
    "array_parallelism": (int, f"jobs of the array running at once (default {ARRAY_PARALLELISM})"),
    "max_requeue": (int, f"times a timed-out job is requeued (default {MAX_REQUEUE})"),
    "signal_delay_s": (int, "seconds before the time limit SLURM signals the job to checkpoint and requeue "
                            "(default: submitit's, 90)"),
    "cluster": (str, "submitit executor: slurm (default), local or debug (testing without a cluster)"),
}
CLUSTERS = ("slurm", "local", "debug")
SECTION_KEYS = ("slurm",)


def parse_slurm(text: str) -> dict[str, Any]:
    """'partition=gpu,gpus_per_node=1' -> {'partition': 'gpu', 'gpus_per_node': 1}, each value checked."""
    options: dict[str, Any] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if "=" not in part:
            raise ConfigError(f"--slurm {text!r}: expected KEY=VALUE pairs separated by commas, e.g. "
                              "partition=gpu,gpus_per_node=1,timeout_min=600")
        key, value = (s.strip() for s in part.split("=", 1))
        options[key] = value
    return check_slurm(options, "--slurm")


def check_slurm(options: Any, where: str) -> dict[str, Any]:
    """Validated options: known names, values of the right type (text from the command line converted),
    positive numbers, a known cluster."""
    if not isinstance(options, Mapping):
        raise ConfigError(f"{where} must be a mapping of SLURM options ({', '.join(SLURM_OPTIONS)}), got {options!r}")
    checked: dict[str, Any] = {}
    for key, value in options.items():
        if key not in SLURM_OPTIONS:
            raise unknown("launcher option", str(key), SLURM_OPTIONS, where)
        kind = SLURM_OPTIONS[key][0]
        if kind is int:
            text = str(value).strip()
            number = int(text) if not isinstance(value, bool) and re.fullmatch(r"-?\d+", text) else None
            if number is None:
                raise ConfigError(f"{where}: {key} must be a whole number, got {value!r}")
            lowest = 0 if key in ("gpus_per_node", "max_requeue") else 1
            if number < lowest:
                raise ConfigError(f"{where}: {key} must be >= {lowest}, got {number}")
            checked[key] = number
        else:
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{where}: {key} must be a non-empty text, got {value!r}")
            checked[key] = value
    if checked.get("cluster", "slurm") not in CLUSTERS:
        raise unknown("cluster", checked["cluster"], CLUSTERS, where)
    return checked


def check_section(section: Any, where: str) -> dict[str, dict[str, Any]]:
    """A task file's ``launcher:`` section: ``{slurm: {option: value}}``."""
    if section is None:
        return {}
    if not isinstance(section, Mapping):
        raise ConfigError(f"{where} must be a mapping such as {{slurm: {{partition: gpu}}}}, got {section!r}")
    for key in section:
        if key not in SECTION_KEYS:
            raise unknown("launcher", str(key), SECTION_KEYS, where)
    return {"slurm": check_slurm(section.get("slurm") or {}, f"{where}.slurm")}
