#!/bin/bash
#SBATCH --mem=2G
echo "$SLURM_JOB_ID"
