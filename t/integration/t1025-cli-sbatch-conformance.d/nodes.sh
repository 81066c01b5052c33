#!/bin/bash
#SBATCH -N 2
echo "$SLURM_JOB_ID"
