#!/bin/bash
#SBATCH --mem=500
echo "$SLURM_JOB_ID"
