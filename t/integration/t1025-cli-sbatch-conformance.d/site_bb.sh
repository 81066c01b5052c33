#!/bin/bash
#SBATCH --bb=capacity=1G
echo "$SLURM_JOB_ID"
