#!/bin/bash
#SBATCH --uid=root
echo "$SLURM_JOB_ID"
