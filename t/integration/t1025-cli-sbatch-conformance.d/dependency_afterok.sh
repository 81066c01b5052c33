#!/bin/bash
#SBATCH -d afterok:@BASE@
echo "$SLURM_JOB_ID"
