#!/bin/bash
#SBATCH -x n4
#SBATCH -N 2
echo "$SLURM_JOB_ID"
