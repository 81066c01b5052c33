#!/bin/bash
#SBATCH --mem=512M
echo "$SLURM_JOB_ID"
