"""The rows of the reference table: what each row trains, and the role that decides which comparisons it enters.

A task's ``leaderboard:`` block names its rows under ``rows:``, each a method of the task with a role::

    rows:
      infonce: {method: contrastive_infonce, role: contrastive}
      infonce+swamp: {method: swamp_infonce, role: with_swamp, base: infonce}
      swamp: {method: swamp, role: swamp}
      dcl: {method: dcl, role: candidate}            # any registered method, a plugin's included
      floor: {method: identity, role: floor}

The roles:

* ``contrastive``: a loss of the contrastive family (X). The strongest of them, chosen on validation, is the rival a
  "SwAMP beats contrastive learning" claim is judged against; a user's own contrastive loss with this role competes
  for that place.
* ``with_swamp``: X + SwAMP, SwAMP's term beside the contrastive loss X of the row named by ``base``; each enters
  the comparison *X + SwAMP − X*, the form of the paper's add-on claims (Doodle2Search + SwAMP, HowTo100M + SwAMP).
* ``swamp``: SwAMP's loss alone.
* ``candidate``: a method to place in the field (a user's own loss): ranked with the rest and compared with the
  strongest contrastive loss as SwAMP alone is.
* ``reference``: ranked but compared with nothing (CCA's closed form).
* ``floor``: the no-training row; every trained cell below it is marked.

Sets made before rows had roles record ``rows: {role_key: method}`` with the fixed keys of :data:`LEGACY_KEYS`;
:func:`legacy_rows` reads them, deciding from each SwAMP row's recorded settings whether SwAMP's term stood alone
or beside a contrastive loss (QMUL's ``swamp`` is the max-violation hinge + SwAMP at weight 1, MSR-VTT's is
HowTo100M's mean hinge + SwAMP).
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.errors import ConfigError, check_keys, did_you_mean

CONTRASTIVE, WITH_SWAMP, SWAMP, CANDIDATE, REFERENCE, FLOOR = (
    "contrastive", "with_swamp", "swamp", "candidate", "reference", "floor")
ROLES: dict[str, str] = {
    CONTRASTIVE: "a contrastive loss X: competes to be the strongest contrastive loss",
    WITH_SWAMP: "X + SwAMP: SwAMP's term beside the contrastive loss of the row named by base",
    SWAMP: "SwAMP's loss alone",
    CANDIDATE: "a method placed in the field: ranked, and compared with the strongest contrastive loss",
    REFERENCE: "ranked, compared with nothing",
    FLOOR: "no training: every trained cell below it is marked",
}
TRAINED = (CONTRASTIVE, WITH_SWAMP, SWAMP, CANDIDATE, REFERENCE)  # roles whose rows train (the floor does not)
ROLE_ORDER = {r: i for i, r in enumerate((CONTRASTIVE, WITH_SWAMP, SWAMP, CANDIDATE, REFERENCE, FLOOR))}

# the contrastive loss family, in the table's order, with the names shown for them
FAMILY: dict[str, str] = {
    "max_violation": "max-violation hinge (VSE++)",
    "sum": "summed hinge",
    "infonce": "InfoNCE",
    "siglip": "SigLIP",
}
WITH = "+swamp"  # the suffix of an X + SwAMP row's name: infonce+swamp
NAME = re.compile(r"[A-Za-z_][\w.+-]*")
ROW_KEYS = ("method", "role", "base", "label")

# the fixed rows of sets made before rows had roles: key -> (role, label)
LEGACY_KEYS: dict[str, str] = {
    "max_violation": CONTRASTIVE, "sum": CONTRASTIVE, "infonce": CONTRASTIVE, "siglip": CONTRASTIVE,
    "swamp": SWAMP, "swamp_infonce": WITH_SWAMP, "cca": REFERENCE, "floor": FLOOR,
}
_LEGACY_LABELS = {"swamp": "SwAMP", "cca": "CCA", "floor": "no training (identity)"}


@dataclass(frozen=True)
class Row:
    """One row of a set: its name in the table, the task's method it tunes, its role, and for X + SwAMP the row of
    X (``base``)."""

    name: str
    method: str
    role: str
    base: str | None = None
    label: str = ""

    @property
    def shown(self) -> str:
        """The row's name as the table prints it: the label given, else the loss's name (``InfoNCE + SwAMP``)."""
        return self.label or label_of(self.name, self.role, self.base)

    def record(self) -> dict[str, Any]:
        """The row as a set's manifest records it."""
        out: dict[str, Any] = {"method": self.method, "role": self.role}
        if self.base:
            out["base"] = self.base
        if self.label:
            out["label"] = self.label
        return out


def label_of(name: str, role: str, base: str | None = None) -> str:
    """A row's printed name: the family's names for its losses, SwAMP's term as ``+ SwAMP``."""
    if role == WITH_SWAMP and base:
        return f"{label_of(base, CONTRASTIVE)} + SwAMP"
    if role == FLOOR:
        return _LEGACY_LABELS["floor"] if name == "floor" else f"{name} (no training)"
    return FAMILY.get(name) or _LEGACY_LABELS.get(name) or name


def parse_rows(raw: Any, where: str) -> dict[str, Row]:
    """A ``rows:`` mapping (a task's block or a set's manifest), checked: names are words, roles known, every
    ``with_swamp`` row's ``base`` a ``contrastive`` row of the same block, at most one floor."""
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError(f"{where} must map row names to {{method: M, role: R}} (roles: {', '.join(ROLES)})")
    rows: dict[str, Row] = {}
    for name, entry in raw.items():
        at = f"{where}.{name}"
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ConfigError(f"{where}: row names are words such as 'infonce+swamp' or 'my_loss', got {name!r}")
        if not isinstance(entry, Mapping):
            raise ConfigError(f"{at} must be a mapping such as {{method: {name}, role: candidate}}, got {entry!r}")
        check_keys(entry, ROW_KEYS, at, "a row")
        method, role = entry.get("method"), entry.get("role")
        if not isinstance(method, str) or not method:
            raise ConfigError(f"{at}.method must name one of the task's methods")
        if role not in ROLES:
            raise ConfigError(f"{at}.role must be one of {', '.join(ROLES)}, got {role!r}"
                              f"{did_you_mean(str(role), ROLES)}")
        base = entry.get("base")
        if (role == WITH_SWAMP) != (base is not None):
            raise ConfigError(f"{at}: a with_swamp row names its contrastive loss's row with base (and only it "
                              "does), e.g. infonce+swamp: {method: swamp_infonce, role: with_swamp, base: infonce}")
        label = entry.get("label", "")
        if not isinstance(label, str):
            raise ConfigError(f"{at}.label must be text, got {label!r}")
        rows[name] = Row(name, method, str(role), None if base is None else str(base), label)
    for row in rows.values():
        if row.base is not None and (row.base not in rows or rows[row.base].role != CONTRASTIVE):
            valid = [r.name for r in rows.values() if r.role == CONTRASTIVE]
            raise ConfigError(f"{where}.{row.name}.base: {row.base!r} is not a contrastive row of this block"
                              f"{did_you_mean(row.base, valid)}; contrastive rows: {', '.join(valid) or 'none'}")
    if sum(1 for r in rows.values() if r.role == FLOOR) > 1:
        raise ConfigError(f"{where}: at most one row has the role floor")
    return rows


def legacy_base(method_settings: Mapping[str, Any]) -> str | None:
    """The contrastive loss beside SwAMP's term in a SwAMP row of a set made before rows had roles, read from its
    recorded settings: None for SwAMP alone (``contrastive_weight`` 0), the summed hinge for HowTo100M's max-margin
    loss (``swamp_mmr``: the summed hinge averaged over the batch), else the row's ``loss`` (the max-violation hinge
    by default)."""
    if float(method_settings.get("contrastive_weight", 0.0) or 0.0) <= 0:
        return None
    if method_settings.get("method") == "swamp_mmr":
        return "sum"
    return str(method_settings.get("loss") or "max_violation")


def legacy_rows(rows: Mapping[str, str], settings: Mapping[str, Mapping[str, Any]]) -> dict[str, Row]:
    """The rows of a set made before rows had roles (``{key: method}``, keys of :data:`LEGACY_KEYS`), each given its
    role; ``settings`` maps a method to its recorded settings (``method`` and its parameters), which decide whether
    a SwAMP row is SwAMP alone or X + SwAMP (and so its name: ``max_violation+swamp``)."""
    out: dict[str, Row] = {}
    for key, method in rows.items():
        if key not in LEGACY_KEYS:
            raise ConfigError(f"unknown row {key!r} of a set made before rows had roles; rows: "
                              f"{', '.join(LEGACY_KEYS)}")
        role = LEGACY_KEYS[key]
        if role in (SWAMP, WITH_SWAMP):
            base = legacy_base(settings.get(method, {}))
            out[key if base is None else base + WITH] = (Row(key, method, SWAMP) if base is None
                                                         else Row(base + WITH, method, WITH_SWAMP, base))
        else:
            out[key] = Row(key, method, role)
    return dict(sorted(out.items(), key=lambda kv: (ROLE_ORDER[kv[1].role], _family_index(kv[1]))))


def _family_index(row: Row) -> int:
    key = row.base if row.role == WITH_SWAMP and row.base else row.name
    names = list(FAMILY)
    return names.index(key) if key in names else len(names)


def of_role(rows: Mapping[str, Row], *roles: str) -> list[Row]:
    """The rows with one of ``roles``, in the block's order."""
    return [r for r in rows.values() if r.role in roles]


def pairs(rows: Mapping[str, Row]) -> list[tuple[Row, Row]]:
    """Each X + SwAMP row with its X: the pairs of the comparison *X + SwAMP − X*, in the family's order."""
    found = [(r, rows[r.base]) for r in rows.values() if r.role == WITH_SWAMP and r.base is not None and r.base in rows]
    return sorted(found, key=lambda p: _family_index(p[0]))


def order_key(row: Row) -> tuple[int, int, str]:
    """A row's place in a table over several sets: by role (contrastive, X + SwAMP, SwAMP, candidate, reference,
    floor), then by the family's order of its loss (of its X for X + SwAMP), then by name."""
    return ROLE_ORDER[row.role], _family_index(row), row.name
