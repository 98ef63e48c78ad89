"""The emulator's answer mode (quality evaluation): answers from a table, with a deterministic share of wrong
answers and refusals (`answers_file`, `wrong_fraction`, `refuse_fraction` in optigate.emulator.config)."""

from __future__ import annotations

import json

from optigate.emulator.config import Behaviour

REFUSAL_TEXT = "I'm sorry, but I can't help with that request."
WRONG_TEXT = "I believe the answer is something else entirely."


class AnswerBook:
    """Answers from a table, with a deterministic share of wrong answers and refusals."""

    def __init__(self, behaviour: Behaviour) -> None:
        import hashlib

        with open(behaviour.answers_file or "", encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle if line.strip()]
        self.rows = sorted(rows, key=lambda r: -len(str(r.get("model_input") or r.get("prompt") or "")))
        self.exact = {str(r.get("model_input") or r.get("prompt") or ""): r for r in rows}
        self.outcome: dict[str, str] = {}

        def stable(row: dict) -> str:
            return hashlib.sha256(str(row.get("id")).encode()).hexdigest()

        for kind, fraction, categories in (
            ("refuse", behaviour.refuse_fraction, behaviour.refuse_categories),
            ("wrong", behaviour.wrong_fraction, behaviour.wrong_categories),
        ):
            pool = [r for r in rows if not categories or r.get("category") in categories]
            pool = [r for r in sorted(pool, key=stable) if str(r.get("id")) not in self.outcome]
            for row in pool[: round(fraction * len(pool))]:
                self.outcome[str(row.get("id"))] = kind

    def _row(self, prompt: str) -> dict | None:
        row = self.exact.get(prompt)
        if row is not None:
            return row
        return next((r for r in self.rows if str(r.get("model_input") or r.get("prompt") or "") in prompt), None)

    def answer(self, prompt: str) -> str:
        row = self._row(prompt)
        if row is None:
            return "I do not know."
        kind = self.outcome.get(str(row.get("id")))
        if kind == "refuse":
            return REFUSAL_TEXT
        if kind == "wrong":
            return WRONG_TEXT
        return str(row.get("target_output") or row.get("answer") or "").split("<OR>")[0]
