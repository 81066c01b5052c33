#!/bin/bash
#SBATCH --mem-per-cpu=600
#SBATCH -c 2
echo "$SLURM_JOB_ID"
