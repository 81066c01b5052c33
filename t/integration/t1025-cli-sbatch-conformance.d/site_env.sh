#!/bin/bash
#SBATCH --get-user-env
#SBATCH --no-requeue
#SBATCH --kill-on-invalid-dep=yes
#SBATCH --time-min=5
#SBATCH --spread-job
#SBATCH --use-min-nodes
#SBATCH --propagate=STACK
echo "$SLURM_JOB_ID"
