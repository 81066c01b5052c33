#!/bin/bash
#SBATCH --time=1-
echo "$SLURM_JOB_ID"
