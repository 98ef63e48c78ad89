"""Quality per adapter: the adapters spec of the evaluation job and the overall verdict over the adapters' own.

An endpoint serving LoRA adapters through inference components is evaluated adapter by adapter: each adapter's
component on the baseline twin against the same adapter's component on the candidate, on that adapter's dataset,
with the one rule of :mod:`optigate.evaluate.quality_verdict`. The overall verdict fails when any adapter fails,
is unresolved when none fails and any is unresolved (or an expected adapter has no verdict), and passes only when
every expected adapter passed.

The spec on the command line: ``--adapter NAME BASELINE_COMPONENT CANDIDATE_COMPONENT [DATASET]``, once per
adapter (the base component too, when the base is evaluated, e.g. as ``base``); DATASET is a JSONL file or a
folder holding one, by default ``--dataset``. ``--baseline`` and ``--candidate`` then name the two endpoints.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from optigate.evaluate.input_errors import InputError
from optigate.evaluate.quality_verdict import Verdict, check_dict

#: What one --adapter says, in order; DATASET is optional.
SPEC_FIELDS = ("NAME", "BASELINE_COMPONENT", "CANDIDATE_COMPONENT", "DATASET")
#: SageMaker's InferenceComponentName (botocore's CreateInferenceComponent model: max 63, this pattern).
COMPONENT_PATTERN = r"^[a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])?$"
COMPONENT_MAX = 63
#: An adapter's name (the config's are lower-case letters, digits and hyphens); it names a folder of the output.
NAME_PATTERN = r"[A-Za-z0-9][A-Za-z0-9_-]{0,62}"


@dataclass(frozen=True)
class AdapterSpec:
    """One adapter to evaluate: its component on each side and where its records are."""

    name: str
    baseline_component: str
    candidate_component: str
    dataset: str


def parse_adapters(values: Sequence[Sequence[str]] | None, default_dataset: str) -> list[AdapterSpec]:
    """The --adapter groups as specs; a malformed group is an `InputError` (one line naming it)."""
    specs: list[AdapterSpec] = []
    for group in values or []:
        shown = " ".join(group)
        if not 3 <= len(group) <= 4:
            raise InputError(
                f"--adapter {shown}: expected {' '.join(SPEC_FIELDS[:3])} [{SPEC_FIELDS[3]}], got {len(group)} values"
            )
        name, baseline, candidate = group[0], group[1], group[2]
        dataset = group[3] if len(group) == 4 else default_dataset
        for what, component in (("BASELINE_COMPONENT", baseline), ("CANDIDATE_COMPONENT", candidate)):
            if len(component) > COMPONENT_MAX or not re.fullmatch(COMPONENT_PATTERN, component):
                raise InputError(
                    f"--adapter {shown}: {what} {component!r} is not an inference component name "
                    f"(letters, digits and inner hyphens, at most {COMPONENT_MAX} characters)"
                )
        if not re.fullmatch(NAME_PATTERN, name):
            raise InputError(
                f"--adapter {shown}: NAME {name!r} is not an adapter name (letters, digits, '-' and '_'; it names "
                "the adapter's output folder)"
            )
        if not dataset.strip():
            raise InputError(f"--adapter {shown}: DATASET must not be empty")
        if any(spec.name == name for spec in specs):
            raise InputError(f"--adapter {shown}: adapter {name!r} is listed twice")
        specs.append(AdapterSpec(name, baseline, candidate, dataset))
    return specs


def named(adapter: str, text: str) -> str:
    """A reason or warning of one adapter's verdict, as the overall verdict says it."""
    return f"adapter {adapter}: {text}"


@dataclass
class AdapterVerdicts:
    """The overall verdict over the adapters (fail > unresolved > pass) and each adapter's own."""

    status: str
    reasons: list[str]
    warnings: list[str]
    adapters: dict[str, Verdict]
    records: dict[str, int]

    @property
    def passed(self) -> bool:
        return self.status == "pass"

    def to_dict(self) -> dict[str, Any]:
        """verdict.json's top-level keys for the overall verdict, each check naming its adapter, and "adapters"."""
        return {
            "status": self.status,
            "passed": self.passed,
            "reasons": self.reasons,
            "warnings": self.warnings,
            "checks": [
                {"adapter": name, **check_dict(check)}
                for name, verdict in self.adapters.items()
                for check in verdict.checks
            ],
            "adapters": {
                name: {**verdict.to_dict(), "records": self.records.get(name, 0)}
                for name, verdict in self.adapters.items()
            },
        }


def overall(
    verdicts: Mapping[str, Verdict], expected: Sequence[str], records: Mapping[str, int] | None = None
) -> AdapterVerdicts:
    """Fail when an adapter fails; unresolved when none fails and one is unresolved, or an expected adapter has
    no verdict (or none is expected); pass only when every expected adapter passed."""
    missing = [name for name in expected if name not in verdicts]
    failed = [name for name in expected if name in verdicts and verdicts[name].status == "fail"]
    unresolved = [name for name in expected if name in verdicts and verdicts[name].status not in ("pass", "fail")]
    warnings = [named(name, w) for name, v in verdicts.items() for w in v.warnings]
    if failed:
        status = "fail"
        reasons = [named(name, r) for name in failed for r in verdicts[name].reasons or ["failed"]]
        # What else could not be told is said too: a fixed failure would still leave these to resolve.
        warnings += [named(name, r) for name in unresolved for r in verdicts[name].reasons]
        warnings += [named(name, "no verdict: the adapter was not evaluated") for name in missing]
    elif unresolved or missing or not expected:
        status = "unresolved"
        reasons = [named(name, r) for name in unresolved for r in verdicts[name].reasons or ["unresolved"]]
        reasons += [named(name, "no verdict: the adapter was not evaluated") for name in missing]
        if not expected:
            reasons.append("no adapters were evaluated")
    else:
        status, reasons = "pass", []
    ordered = {name: verdicts[name] for name in expected if name in verdicts}
    return AdapterVerdicts(status, reasons, warnings, ordered, dict(records or {}))
