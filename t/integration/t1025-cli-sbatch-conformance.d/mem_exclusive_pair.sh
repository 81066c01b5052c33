#!/bin/bash
#SBATCH --mem=100
#SBATCH --mem-per-cpu=100
echo "$SLURM_JOB_ID"
