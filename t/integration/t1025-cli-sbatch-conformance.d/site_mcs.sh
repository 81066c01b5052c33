#!/bin/bash
#SBATCH --mcs-label=x
echo "$SLURM_JOB_ID"
