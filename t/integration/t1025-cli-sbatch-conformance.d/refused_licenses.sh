#!/bin/bash
#SBATCH -L matlab
echo "$SLURM_JOB_ID"
