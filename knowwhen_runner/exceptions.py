"""The errors knowwhen_runner raises on purpose.

    KnowwhenError                 any known failure; the CLI prints its message in one line, exit 2
    ├── ConfigError               a sweep config that does not load or validate (file:line: field: message)
    ├── ScenarioError             a scenario or dataset file that is missing or malformed (file:line: ...)
    ├── QueueError                the run database: wrong schema version, locked, unreachable, disk full
    │   ├── SchemaVersionError    a database written by another version of the code
    │   └── DatabaseUnavailable   the database is away (restart, failover, dropped connection, SQLite
    │                             lock held by another process): waited out up to workers.max_db_outage_s,
    │                             then the process stops with this sentence, exit 6
    ├── ProviderError             a model call that failed for good (after retries), with its class;
    │   │                         kind "down": the model is down, no attempt was spent (the job waits)
    │   ├── BudgetSpent           (work.budget) a call not made: it would pass a budget cap (kind "budget")
    │   ├── OtherModel            every try of a call was answered by another model than the one asked
    │   │                         (a gateway's fallback, a wrong deployment): kind "other_model"
    │   └── ModelFailing          (provider.failing) a call not made: its model is set aside (a test says
    │                             its requests surely fail; kind "down": probed again) or quarantined
    ├── PreflightError            (sweep.preflight) a model failed its pre-flight probe: no-go, nothing spent
    ├── EvalSeedError             (gym.splits) the eval split's seeds asked for without opting in
    └── ServeError                the built-in local server could not start

Every message is one sentence a user can act on, and never carries an API key. A class shown with a
module lives there, beside the stage that raises it; the others live here.

The local server has errors of its own that never leave it (each becomes an HTTP error response):
``InvalidRequest`` (serve.systemone), ``BadRequest`` (serve.app), ``BatchError`` (serve.batch_api),
``UnsupportedEncoding``, ``UndecodableBody``, ``BodyTooLarge`` and ``BodyTimeout`` (serve.encoding),
``LogprobsRefusal`` (serve.readout.logprobs). A read-out's reply it cannot read is ``Unreadable``
(provider.readout.reading): it becomes the answer's error, never leaves the read-out.

The direct transport's error answers (provider.direct.failures) carry litellm's class names, so that the
retry rules read a failure alike whichever transport sent it: ``WireError``, and under it
``BadRequestError`` (``UnprocessableEntityError``), ``AuthenticationError``, ``PermissionDeniedError``,
``NotFoundError``, ``RateLimitError``, ``InternalServerError``, ``BadGatewayError``,
``ServiceUnavailableError``, ``Timeout`` and ``APIError``. They become a ``ProviderError`` in the client.
"""

from __future__ import annotations

from typing import Literal

EXIT_REQUEUE = 75
"""Exit code of a process stopped by SIGTERM after handing its jobs back (EX_TEMPFAIL): it may be requeued."""

__all__ = [
    "EXIT_REQUEUE",
    "ConfigError",
    "DatabaseUnavailable",
    "ErrorKind",
    "KnowwhenError",
    "OtherModel",
    "ProviderError",
    "QueueError",
    "ScenarioError",
    "SchemaVersionError",
    "ServeError",
]


ErrorKind = Literal["retry", "retry_after", "rate_limited", "fatal", "down", "budget", "other_model"]
"""Why a model call failed: a verdict of ``provider.classify`` (a failed call keeps its last one), ``down``
(the model is down; no attempt was spent), ``budget`` (a budget cap said no before the call) or
``other_model`` (the replies came from another model: ``OtherModel``)."""


class KnowwhenError(Exception):
    """A known failure with a message meant for the user."""

    exit_code = 2


class ConfigError(KnowwhenError):
    """The sweep config is missing, unreadable or invalid."""


class ScenarioError(KnowwhenError):
    """A scenario or dataset file is missing or malformed."""


class QueueError(KnowwhenError):
    """The run database cannot be used."""


class SchemaVersionError(QueueError):
    """The run database was written by another version of knowwhen_runner."""


class DatabaseUnavailable(QueueError):
    """The run database cannot be reached for now (raised for each try; the last one ends the process)."""

    exit_code = 6


class ProviderError(KnowwhenError):
    """A model call failed for good."""

    def __init__(
        self, message: str, *, kind: ErrorKind = "fatal", status: int | None = None, requests: int = 0
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.requests = requests  # HTTP requests the failed call made (a refused connection counts)


class OtherModel(ProviderError):
    """A reply that came from another model than the one asked: never an answer (not cached, not scored).

    Raised for each such reply (the call retries it like a 5xx); a call whose every try got one fails with
    it, and its model is set aside for the run (``work.quarantine``). ``model_id`` is the model asked
    (an episode's agent, say, not always the job's own model)."""

    def __init__(
        self, model_id: str, asked: str, answered: str | None, fallbacks: int, requests: int = 0
    ) -> None:
        how = (
            f"the gateway fell back to {answered or 'another model'}"
            if fallbacks
            else f"it came from {answered}"
        )
        super().__init__(
            f"{model_id}: a reply to {asked!r} was another model's ({how})",
            kind="other_model",
            requests=requests,
        )
        self.model_id, self.asked, self.answered, self.fallbacks = model_id, asked, answered, fallbacks


class ServeError(KnowwhenError):
    """The built-in local server could not be started."""
