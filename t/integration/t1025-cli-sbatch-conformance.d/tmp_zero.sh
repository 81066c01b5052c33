#!/bin/bash
#SBATCH --tmp=0
echo "$SLURM_JOB_ID"
