#!/bin/bash
#SBATCH --mail-type=END,FAIL
#SBATCH --mail-user=someone@example.org
echo "$SLURM_JOB_ID"
