#!/bin/bash
#SBATCH --tasks-per-node=1 -N 3
echo "$SLURM_JOB_ID"
