#!/bin/bash
#SBATCH --begin=2030-01-01T10:00:00
echo "$SLURM_JOB_ID"
