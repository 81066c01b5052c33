#!/bin/bash
#SBATCH --tmp=10G
echo "$SLURM_JOB_ID"
