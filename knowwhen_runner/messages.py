"""The sentences the runner prints that tell a user what to do next, why it stopped, or what to watch for,
each written once under a stable id. The code prints them with ``say(ID, **fields)``; each id has a journey
test (marked ``journey(ID)``) that drives the CLI into its situation, follows the sentence's step literally
and checks what it promises, and a unit test fails for an id with no journey or one the code never says.

Fields are filled by ``str.format``: a template names each field it takes, and a caller gives every one.
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Formatter

__all__ = ["MESSAGES", "Message", "jobs", "say"]


@dataclass(frozen=True)
class Message:
    """One sentence: its id, its template, and what following it does (what its journey checks)."""

    id: str
    text: str
    promise: str

    @property
    def fields(self) -> frozenset[str]:
        """The names the template takes."""
        return frozenset(name for _lit, name, _spec, _conv in Formatter().parse(self.text) if name)


_ALL = (
    # --- how a run or a worker ends -----------------------------------------------------------------
    Message(
        "run.pending",
        "{n} jobs are still pending: run the same command again to continue",
        "the same command, run again once the cause is gone, answers them",
    ),
    Message(
        "run.stopped_waiting",
        "stopped waiting for {model}: {reason}",
        "the run ends (exit 3) with the model's jobs pending and unspent; a rerun asks them",
    ),
    Message(
        "run.failed",
        "{n} jobs failed (most common, {k} of them: {reason}); fix the cause and rerun with --retry-failed",
        "with the cause fixed, the same command with --retry-failed answers the failed jobs",
    ),
    Message(
        "run.interrupted",
        "interrupted: run the same command again to resume",
        "the same command, run again, finishes the run without asking a recorded question again",
    ),
    Message(
        "run.stale_jobs",
        "set aside: {n} jobs of an earlier version of the config (kept, not worked, not finalised; they "
        "come back if the config does)",
        "the earlier config, run again, takes those jobs back with their results and makes no call",
    ),
    Message(
        "status.stale_jobs",
        "{n} jobs of an earlier version of the config set aside (kept, not worked, not in the results)",
        "status counts the jobs a changed config set aside",
    ),
    Message(
        "run.waiting_stage",
        "waiting: {note} ({reason})",
        "a run or worker plans the waiting cells once their stage is done",
    ),
    Message(
        "stage.fit_failed",
        "some shadow episodes failed: rerun with --retry-failed",
        "with the cause fixed, a run with --retry-failed answers them, fits τ and plays the gated episodes",
    ),
    Message(
        "stage.fit_pending",
        "its shadow episodes are not all done yet; any run or worker plans it once they are",
        "a run that finishes the shadow episodes plans and answers the gated ones",
    ),
    Message(
        "worker.interrupted",
        "interrupted: its unfinished jobs are back in the queue for the other workers",
        "another worker, started on the run, finishes every job",
    ),
    Message(
        "db.no_run",
        "{url}: the database has no run; run it first",
        "once `knowwhen run CONFIG --db URL --plan-only` planned it, the same command finds the run",
    ),
    Message(
        "db.empty_file",
        "{db}: the database has no run (it is empty); run the config to start it",
        "the config, run, starts the run afresh in that folder",
    ),
    Message(
        "finalize.no_run",
        "{output}: the database has no run {name!r}; run it first",
        "once the run is planned and worked, the same finalize writes its results",
    ),
    Message(
        "worker.no_run",
        "no run {run!r} in this database; plan it with knowwhen run CONFIG --db URL --plan-only (or give "
        "--wait SECONDS to wait for it)",
        "once `knowwhen run CONFIG --db URL --plan-only` planned it, the same worker works the run",
    ),
    Message(
        "worker.not_finalised_here",
        "not finalised here: {path} is not on this machine; run knowwhen finalize where it is",
        "`knowwhen finalize` where the files are writes the run's results",
    ),
    Message(
        "signal.stopping",
        "stopping — finishing the calls in flight (Ctrl-C again to cancel them); rerun to resume",
        "the process ends within seconds (exit 130), and a rerun finishes the run",
    ),
    Message(
        "signal.handover",
        "SIGTERM — handing over: unstarted jobs go back now, calls in flight get {grace} s; exit code {code} "
        "(may be requeued)",
        "the worker exits with the requeue code, holding no job, and another worker finishes the run",
    ),
    # --- models the run holds back ------------------------------------------------------------------
    Message(
        "held.paused.run",
        "paused {model}: its {jobs} wait until it is resumed: {resume}, then run the same command again",
        "the printed resume, then the same run, answers every job of the model",
    ),
    Message(
        "held.paused.worker",
        "paused {model}: its {jobs} wait until it is resumed: {resume}, then start a worker again",
        "the printed resume, then a worker started again, answers every job of the model",
    ),
    Message(
        "held.paused.status",
        "paused {model}: its {jobs} wait until it is resumed: {resume}",
        "status names the command that resumes the model",
    ),
    Message(
        "held.screened",
        "{model}: {reason}; {n} of its jobs {were} not asked: run again without screen: to ask them",
        "the config without `screen:`, run again, asks exactly those jobs",
    ),
    Message(
        "held.set_aside",
        "set aside {model}: {reason}; its {jobs} wait for it",
        "once the model answers again, the same command answers its jobs",
    ),
    Message(
        "held.quarantined",
        "quarantined {model}: {reason}; its {jobs} stay pending",
        "with the named fix made, the same command answers them",
    ),
    Message(
        "pause.unknown_model",
        "{run_dir}: the run has no model {model!r}; its models are {models}",
        "pause and resume exit 2 for an id the run does not have, naming those it has",
    ),
    # --- why a model is quarantined ------------------------------------------------------------------
    Message(
        "quarantine.unknown_model",
        "the provider does not know the model {model!r}{where} ({error}); fix `model:` (or `api_base:`) of "
        "{id} in the config",
        "with `model:` fixed, the same command answers the model's jobs",
    ),
    Message(
        "quarantine.refused_key",
        "the provider refused the key ({error}); check {key}",
        "once the provider takes the key, the same command answers the model's jobs",
    ),
    Message(
        "quarantine.other_model",
        "every try of a call got another model's reply (none was recorded): the replies to {asked!r} came "
        "from {answered!r}; if that is the provider's own name for it, add `served_as: {answered}` to {id} "
        "in the config, else fix its `model:` (or `api_base:`)",
        "with `served_as:` added, the same command answers the model's jobs",
    ),
    Message(
        "quarantine.fallback",
        "every try of a call got another model's reply (none was recorded): the gateway{where} falls back "
        "from {asked!r} to {answered}; bring its deployment back (or remove the fallback) and run again",
        "with the deployment back, the same command answers the model's jobs with its own replies",
    ),
    Message(
        "quarantine.invalid",
        "{bad} of its {n} answers were invalid (last: {last}); check the model's output format and its "
        "`params`, or raise workers.quarantine_invalid_share",
        "once the model answers in its format, the same command answers the rest of its jobs",
    ),
    Message(
        "run.other_model_replies",
        "{n} replies to {model} came from another model (not recorded, not cached; last: {last})",
        "no reply of another model is recorded or cached",
    ),
    # --- said while a run works (standard error) -----------------------------------------------------
    Message(
        "progress.quarantined",
        "quarantined {model} for this run: {reason}; its jobs stay pending, the other models go on",
        "the other models answer every job while the model's stay pending",
    ),
    Message(
        "progress.set_aside",
        "set aside {model}: {reason}; it is probed every {every} s and comes back when it answers, its jobs "
        "wait, the other models go on",
        "once a probe answers, the same run answers the model's jobs",
    ),
    Message(
        "progress.stated_limit",
        "{name}: its provider states a limit of {stated} {kind}/min, below the configured {configured}; "
        "sending at {stated} (lower rate_limit in the config to match)",
        "with rate_limit lowered to the stated limit, the run says nothing of it",
    ),
    # --- before a run starts ------------------------------------------------------------------------
    Message(
        "preflight.no_go",
        "pre-flight: {said}; fix {them}, or leave {them} out of this run with {skips}",
        "the same command with the printed --skip-model flags runs the other models",
    ),
    Message(
        "preflight.unknown_price",
        "its price is unknown{spent}: give {id} a `pricing:` entry in the config",
        "with a `pricing:` entry, the model is a go",
    ),
    Message(
        "budget.spent",
        "{scope} is spent ({limits}): it bought {calls} model calls; {pending} jobs wait. Raise {scope} in "
        "the config and run again to continue",
        "with the cap raised, the same command answers the waiting jobs, none asked twice",
    ),
    Message(
        "plan.no_price",
        "no price for {model}: add to it in the config  {line}",
        "with the printed line in the model's entry, the forecast prices it",
    ),
    Message(
        "plan.waits_for_fit",
        "{note}: these episodes are planned once the fit is done, and are not in the forecast",
        "once a run finishes the fit, the gated episodes are planned and answered",
    ),
    Message(
        "serve.port_taken",
        "serve: port {port} on {host} is held by a server this run did not start (another program, or a "
        "knowwhen serve started by hand or by another run); stop it, or set serve.port and the api_base of "
        "the models it serves to a free port",
        "with serve.port and the models' api_base on a free port, the run starts its own server there and "
        "finishes, sending the other server nothing",
    ),
    # --- data the run needs -------------------------------------------------------------------------
    Message(
        "l1.folder_missing",
        "{path} does not exist; fetch it with `knowwhen fetch-l1 --out {path}`",
        "the printed fetch-l1 fills the folder and the config loads",
    ),
    Message(
        "l1.source_missing",
        "{scenario}: {source} is missing ({where}), which leaves out up to {jobs} jobs ({items} items x "
        "{models}); fetch it with `{fetch}`",
        "the printed fetch-l1, then the run again, adds the source's items",
    ),
    Message(
        "l1.no_items",
        "scenario {scenario!r}: no isolated items left (check caps and exclude); fetch the data with "
        "`knowwhen fetch-l1 --out {path}`",
        "the printed fetch-l1 fills the folder and the scenario loads",
    ),
    Message(
        "scenarios.fetch_dataset",
        "AgentDecisionBench: not in {path} (knowwhen fetch-dataset --out {path})",
        "the printed fetch-dataset downloads it, and `knowwhen scenarios` then lists its sets",
    ),
    Message(
        "scenarios.fetch_l1",
        "L1 data: not in {path} (knowwhen fetch-l1 --out {path})",
        "the printed fetch-l1 fetches it, and `knowwhen scenarios` then counts its items",
    ),
    Message(
        "fetch_l1.partial",
        "{error}; {fetched} {are} in place and recorded in {manifest}, {source} is not: run the same "
        "command again to fetch it",
        "the same command, run again, fetches the rest and records it",
    ),
    Message(
        "subset.sample",
        "a seeded sample of {asked} of {of} {unit}{tasks} (seed {seed})",
        "the run asks that many, and its manifest and tables name the sample",
    ),
    # --- what to run next ---------------------------------------------------------------------------
    Message(
        "init.next",
        "next: knowwhen plan {path}, then knowwhen run {path}",
        "plan, then run, of the written config finish with the models asked",
    ),
    Message(
        "import.next",
        "next: knowwhen finalize {output}",
        "finalize writes the imported run's manifests and tables",
    ),
    Message(
        "compare.not_finalised",
        "{run}: no CXS manifests (manifests/*.cxs.json); run `knowwhen finalize` on it",
        "after `knowwhen finalize` on the run, compare reads it",
    ),
    Message(
        "export.not_finalised",
        "{output}: no manifests; finalise the run first (knowwhen finalize)",
        "after `knowwhen finalize`, export writes the dataset folder",
    ),
)

MESSAGES: dict[str, Message] = {m.id: m for m in _ALL}
"""Every registered sentence, by id."""


def say(message_id: str, **fields: object) -> str:
    """The sentence ``message_id`` with its fields filled in (a field missing or unknown is a bug)."""
    message = MESSAGES[message_id]
    extra = set(fields) - message.fields
    if extra:
        raise TypeError(f"{message_id}: no field {', '.join(sorted(extra))} in its template")
    return message.text.format(**fields)


def jobs(n: int) -> str:
    """``1 job``, ``18 jobs``."""
    return f"{n} job{'' if n == 1 else 's'}"
