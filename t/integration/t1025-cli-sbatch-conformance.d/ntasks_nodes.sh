#!/bin/bash
#SBATCH -N 2 -n 4
echo "$SLURM_JOB_ID"
