#!/bin/bash
#SBATCH --mem=200000K
echo "$SLURM_JOB_ID"
