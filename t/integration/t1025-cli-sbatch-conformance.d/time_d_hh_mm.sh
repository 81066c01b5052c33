#!/bin/bash
#SBATCH -t 3-04:05
echo "$SLURM_JOB_ID"
