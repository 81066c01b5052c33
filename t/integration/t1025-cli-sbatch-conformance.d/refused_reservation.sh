#!/bin/bash
#SBATCH --reservation=maint
echo "$SLURM_JOB_ID"
