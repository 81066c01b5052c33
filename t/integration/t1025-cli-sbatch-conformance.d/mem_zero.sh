#!/bin/bash
#SBATCH --mem=0
echo "$SLURM_JOB_ID"
