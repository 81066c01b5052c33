#!/bin/bash
#SBATCH -O
#SBATCH -n 4
#SBATCH -N 1
echo "$SLURM_JOB_ID"
