#!/bin/bash
#SBATCH --ntasks=1 --nodes=2
echo "$SLURM_JOB_ID"
