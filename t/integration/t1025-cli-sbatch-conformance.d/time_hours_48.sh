#!/bin/bash
#SBATCH --time=48:00:00
echo "$SLURM_JOB_ID"
