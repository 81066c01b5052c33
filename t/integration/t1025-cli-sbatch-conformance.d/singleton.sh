#!/bin/bash
#SBATCH -d singleton
#SBATCH -J solo
echo "$SLURM_JOB_ID"
