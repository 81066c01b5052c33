#!/bin/bash
#SBATCH --begin=now+1hour
echo "$SLURM_JOB_ID"
