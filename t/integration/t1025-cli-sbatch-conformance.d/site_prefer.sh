#!/bin/bash
#SBATCH --prefer=feat
echo "$SLURM_JOB_ID"
