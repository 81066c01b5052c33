#!/bin/bash
#SBATCH -J cfd
#SBATCH -N 2
#SBATCH --ntasks-per-node=2
#SBATCH -t 01:00:00
#SBATCH -p debug
#SBATCH --exclusive
echo "$SLURM_JOB_ID"
