"""Which provider failures quarantine a model for the run, and the sentence that says what to fix.

A 401/403 (the key), a 404 or an unknown model name (the model string or its ``api_base``) or a price
error will fail every job of the model the same way: instead of failing them one by one (and scoring a
model that never answered as wrong), the model is quarantined: its jobs go back to pending, the other
models go on, and the run ends saying what to fix. So is a model whose answers are mostly invalid, and
one whose replies, every try of a call, came from another model (``OtherModel``: a gateway's fallback).
A model whose requests surely fail (5xx, malformed replies) is set aside and probed instead
(``provider.failing``).
"""

from __future__ import annotations

from collections import Counter

from ..config import ModelSpec
from ..exceptions import OtherModel, ProviderError
from ..messages import say
from ..redaction import public_url

__all__ = ["InvalidAnswers", "quarantine_reason"]

_AUTH = (401, 403)
_AUTH_NAMES = ("AuthenticationError", "PermissionDeniedError")
_UNKNOWN_MODEL = ("NotFoundError", "model_not_found", "does not exist", "BadRequestError: LLM Provider NOT")
_PRICE = ("pricing", "price", "cost_per_token", "isn't mapped yet")


def _where(model: ModelSpec) -> str:
    return f" at {public_url(model.api_base)}" if model.api_base else ""


def quarantine_reason(model: ModelSpec, exc: ProviderError) -> str | None:
    """What to fix when ``exc`` will fail every call of ``model`` alike; None for a failure of one call."""
    if isinstance(exc, OtherModel):
        return _other_model(model, exc)
    if exc.kind != "fatal":
        return None
    error = str(exc)
    if exc.status in _AUTH or any(name in error for name in _AUTH_NAMES):
        key = f"the environment variable {model.api_key_env}" if model.api_key_env else "its API key"
        return say("quarantine.refused_key", error=error, key=key)
    if exc.status == 404 or any(mark in error for mark in _UNKNOWN_MODEL):
        return say(
            "quarantine.unknown_model", model=model.model, where=_where(model), error=error, id=model.id
        )
    if any(mark in error.lower() for mark in _PRICE):
        return f"its price is unknown ({error}); give it a `pricing:` entry in the config"
    return None


def _other_model(model: ModelSpec, exc: OtherModel) -> str:
    """Every try of a call got another model's reply: what the gateway or the config should change."""
    if exc.fallbacks:
        answered = exc.answered or "another model"
        return say("quarantine.fallback", where=_where(model), asked=exc.asked, answered=answered)
    return say("quarantine.other_model", asked=exc.asked, answered=exc.answered, id=model.id)


class InvalidAnswers:
    """Counts each model's answers and invalid answers; says when a model is past the threshold."""

    def __init__(self, share: float | None, min_answers: int) -> None:
        self.share, self.min_answers = share, min_answers
        self.answers: Counter[str] = Counter()
        self.invalid: Counter[str] = Counter()
        self.last_error: dict[str, str] = {}

    def add(self, model_id: str, valid: bool, error: str | None) -> str | None:
        """Count one answer; the quarantine reason when the model has just gone past the threshold."""
        self.answers[model_id] += 1
        if not valid:
            self.invalid[model_id] += 1
            self.last_error[model_id] = error or "no reason given"
        n, bad = self.answers[model_id], self.invalid[model_id]
        if self.share is None or n < self.min_answers or bad < self.share * n:
            return None
        return say("quarantine.invalid", bad=bad, n=n, last=self.last_error[model_id])
