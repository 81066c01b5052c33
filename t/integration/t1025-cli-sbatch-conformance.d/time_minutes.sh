#!/bin/bash
#SBATCH -t 30
echo "$SLURM_JOB_ID"
