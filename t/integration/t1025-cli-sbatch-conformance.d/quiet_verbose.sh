#!/bin/bash
#SBATCH -Q
#SBATCH -v
echo "$SLURM_JOB_ID"
