#!/bin/bash
#SBATCH -N 2-4
echo "$SLURM_JOB_ID"
