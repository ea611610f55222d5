#!/bin/bash
# More workers for a run, from a SLURM cluster: each array task is one `knowwhen worker` process that
# joins the run in its PostgreSQL database, works until the run has no open jobs, and exits.
#
#   export KNOWWHEN_DB=postgresql://USER@DBHOST:5432/DATABASE   # password in ~/.pgpass, not here
#   export KNOWWHEN_RUN=my-sweep                                 # the config's `name`
#   export OPENAI_API_KEY=...                                    # every key the config's models name
#   knowwhen run configs/my-sweep.yaml --db "$KNOWWHEN_DB" &     # plans the run and works too
#   sbatch --array=1-16 configs/slurm-worker.sh                  # sixteen more workers
#
# A worker reads the config and the questions from the database, so a node needs no copy of them; it
# takes API keys (and any ${VAR} in the config) from its own environment, which sbatch passes on from
# the submitting shell. The config's rate limits hold for all workers together. A worker may start
# before the run is planned: it waits for it (--wait). Follow the fleet with
#   knowwhen status RUN_DIR --db "$KNOWWHEN_DB" --run "$KNOWWHEN_RUN"
#
#SBATCH --job-name=knowwhen-worker
#SBATCH --cpus-per-task=2
#SBATCH --mem=2G
#SBATCH --time=24:00:00
#SBATCH --output=knowwhen-worker-%A_%a.log

set -euo pipefail
: "${KNOWWHEN_DB:?export KNOWWHEN_DB, the database URL of the run}"
: "${KNOWWHEN_RUN:?export KNOWWHEN_RUN, the name of the run}"

# One process makes at most a few hundred litellm calls per second: for more per node, ask for more
# array tasks rather than more CPUs per task. A killed task loses nothing: its jobs return to the
# queue when their lease runs out, and another worker finishes them.
exec knowwhen worker --db "$KNOWWHEN_DB" --run "$KNOWWHEN_RUN" --wait 600
