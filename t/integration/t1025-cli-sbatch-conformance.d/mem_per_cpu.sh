#!/bin/bash
#SBATCH --mem-per-cpu=200
#SBATCH --cpus-per-task=2
echo "$SLURM_JOB_ID"
