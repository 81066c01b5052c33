#!/bin/bash
#SBATCH -A acct
#SBATCH -p debug
#SBATCH -q normal
echo "$SLURM_JOB_ID"
