#!/bin/bash
#SBATCH --exclusive
#SBATCH --hint=nomultithread
#SBATCH --distribution=block
#SBATCH --cpu-freq=high
#SBATCH --mem-bind=local
echo "$SLURM_JOB_ID"
