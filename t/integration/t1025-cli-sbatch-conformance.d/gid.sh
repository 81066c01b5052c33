#!/bin/bash
#SBATCH --gid=root
echo "$SLURM_JOB_ID"
