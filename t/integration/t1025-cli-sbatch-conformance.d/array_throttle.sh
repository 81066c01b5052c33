#!/bin/bash
#SBATCH --array=0-5%2
echo "$SLURM_JOB_ID"
