#!/bin/bash
#SBATCH --gres=gpu:1
echo "$SLURM_JOB_ID"
