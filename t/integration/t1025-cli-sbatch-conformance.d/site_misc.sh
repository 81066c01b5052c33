#!/bin/bash
#SBATCH --deadline=2030-06-01
#SBATCH --delay-boot=5
#SBATCH --switches=1
#SBATCH --wait-all-nodes=1
#SBATCH --contiguous
#SBATCH -k
echo "$SLURM_JOB_ID"
