#!/bin/bash
#SBATCH -n 3
echo "$SLURM_JOB_ID"
