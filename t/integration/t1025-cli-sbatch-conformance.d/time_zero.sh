#!/bin/bash
#SBATCH -t 0
echo "$SLURM_JOB_ID"
