#!/bin/bash
#SBATCH -t 2-12
echo "$SLURM_JOB_ID"
