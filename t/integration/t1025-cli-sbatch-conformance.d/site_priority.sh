#!/bin/bash
#SBATCH --nice=10
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --signal=B:USR1@60
#SBATCH --wckey=k
echo "$SLURM_JOB_ID"
