#!/bin/bash
#SBATCH -o logs/%x_%j.out
#SBATCH -e logs/%x_%j.err
#SBATCH -J inlogs
echo "$SLURM_JOB_ID"
