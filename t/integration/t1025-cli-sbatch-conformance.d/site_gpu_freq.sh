#!/bin/bash
#SBATCH --gpu-freq=high
echo "$SLURM_JOB_ID"
