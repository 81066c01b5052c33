#!/bin/bash
#SBATCH --output=%x-%j.log
#SBATCH --job-name=pat
echo "$SLURM_JOB_ID"
