#!/bin/bash
#SBATCH --batch=feat
echo "$SLURM_JOB_ID"
