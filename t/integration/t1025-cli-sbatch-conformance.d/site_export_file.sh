#!/bin/bash
#SBATCH --export-file=/dev/null
echo "$SLURM_JOB_ID"
