#!/bin/bash
#SBATCH -N 1-4 -n 4
echo "$SLURM_JOB_ID"
