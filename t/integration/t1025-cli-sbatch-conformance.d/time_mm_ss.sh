#!/bin/bash
#SBATCH -t 10:30
echo "$SLURM_JOB_ID"
