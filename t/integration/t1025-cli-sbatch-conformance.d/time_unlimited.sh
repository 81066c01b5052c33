#!/bin/bash
#SBATCH -t UNLIMITED
echo "$SLURM_JOB_ID"
