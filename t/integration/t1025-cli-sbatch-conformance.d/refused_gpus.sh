#!/bin/bash
#SBATCH -G 1
echo "$SLURM_JOB_ID"
