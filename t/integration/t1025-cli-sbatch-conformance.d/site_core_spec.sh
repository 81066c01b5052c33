#!/bin/bash
#SBATCH -S 1
echo "$SLURM_JOB_ID"
