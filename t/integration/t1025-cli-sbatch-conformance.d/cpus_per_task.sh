#!/bin/bash
#SBATCH -n 2
#SBATCH -c 2
echo "$SLURM_JOB_ID"
