#!/bin/bash
#SBATCH -a 0-3
echo "$SLURM_JOB_ID"
