#!/bin/bash
#SBATCH --job-name="quoted name"   # a trailing comment
#SBATCH --time=5
echo "$SLURM_JOB_ID"
