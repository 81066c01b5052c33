#!/bin/bash
#SBATCH --gpus-per-node=2
echo "$SLURM_JOB_ID"
