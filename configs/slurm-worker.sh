#!/bin/bash
# More workers for a run, from a Slurm cluster: each array task is one `knowwhen worker` process that
# joins the run in its PostgreSQL database, works until the run has no open jobs, and exits. The whole
# walk-through (database, model server, plan, submit, watch, finalise) is in docs/scaling.md. In short,
# from the checkout, on a filesystem the nodes share:
#
#   export KNOWWHEN_DB=postgresql://USER@DBHOST:5432/DATABASE   # password in ~/.pgpass, not here
#   export KNOWWHEN_RUN=my-sweep                                 # the config's `name`
#   export OPENAI_API_KEY=...                                    # every key and ${VAR} the config names
#   .venv/bin/knowwhen run configs/my-sweep.yaml --db "$KNOWWHEN_DB" --plan-only
#   sbatch --array=1-16 configs/slurm-worker.sh                  # sixteen workers
#   .venv/bin/knowwhen status results/my-sweep --db "$KNOWWHEN_DB" --run "$KNOWWHEN_RUN"
#
# The knowwhen it runs: $KNOWWHEN_BIN when set (a path the nodes can reach), else .venv/bin/knowwhen of
# the folder sbatch was called in. A worker reads the config and the questions from the database, so a
# node needs no copy of them; it takes API keys, and any ${VAR} in the config, from its environment,
# which sbatch passes on from the submitting shell. It never starts the config's `serve:` server: a
# local model server runs on one machine (`knowwhen serve --host 0.0.0.0`) and the config reaches it by
# a name every node resolves (`api_base: ${KNOWWHEN_SERVE}`), not 127.0.0.1, which is each node's own.
#
# A cancelled, preempted or requeued task loses nothing: on SIGTERM (scancel, scontrol requeue,
# preemption) the worker stops claiming, hands back at once the jobs it claimed but has not started,
# lets its calls in flight finish for workers.stop_grace_s (20 s, inside Slurm's 30 s KillWait), records
# them, hands back the rest, and exits with code 75; another worker (or the task itself, requeued) does
# them. No job waits for a lease to run out. A requeued task appends to its log: each attempt starts
# with a line naming it.
#
#SBATCH --job-name=knowwhen-worker
#SBATCH --cpus-per-task=1
#SBATCH --mem=2G
#SBATCH --time=24:00:00
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=knowwhen-worker-%A_%a.log

set -euo pipefail
: "${KNOWWHEN_DB:?export KNOWWHEN_DB, the database URL of the run}"
: "${KNOWWHEN_RUN:?export KNOWWHEN_RUN, the name of the run}"
knowwhen="${KNOWWHEN_BIN:-${SLURM_SUBMIT_DIR:-$PWD}/.venv/bin/knowwhen}"
if [[ ! -x "$knowwhen" ]]; then
    echo "slurm-worker.sh: $knowwhen is not an executable on $(hostname): install the checkout's .venv" \
        "on a filesystem the nodes share, or export KNOWWHEN_BIN=/path/to/knowwhen" >&2
    exit 2
fi
echo "slurm-worker.sh: task ${SLURM_ARRAY_TASK_ID:-} of job ${SLURM_ARRAY_JOB_ID:-${SLURM_JOB_ID:-}}," \
    "attempt $((${SLURM_RESTART_COUNT:-0} + 1)), on $(hostname) at $(date -u +%FT%TZ)"

# One process makes at most a few hundred litellm calls per second: for more per node, ask for more
# array tasks (one CPU each) rather than more CPUs per task.
# Arguments after the script's name go to the worker: sbatch ... configs/slurm-worker.sh --no-finalize
exec "$knowwhen" worker --db "$KNOWWHEN_DB" --run "$KNOWWHEN_RUN" --wait 600 --quiet "$@"
