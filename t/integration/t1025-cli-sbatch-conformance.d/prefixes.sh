#!/bin/bash
#SBATCH --job-nam=pref
#SBATCH --tasks=1
#SBATCH --cpus-per-t=1
echo "$SLURM_JOB_ID"
