#!/bin/bash
#SBATCH --ignore-pbs
echo "$SLURM_JOB_ID"
