#!/bin/bash
#SBATCH --nodes=3
echo "$SLURM_JOB_ID"
