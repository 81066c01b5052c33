#!/bin/bash
#SBATCH --ntasks-per-node=2
#SBATCH -N 2
echo "$SLURM_JOB_ID"
