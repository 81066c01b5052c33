#!/bin/bash
#SBATCH --array=1,3,7
#SBATCH -o arr-%A_%a.out
echo "$SLURM_JOB_ID"
