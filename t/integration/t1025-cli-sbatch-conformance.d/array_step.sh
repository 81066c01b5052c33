#!/bin/bash
#SBATCH --array=1-9:2
echo "$SLURM_JOB_ID"
