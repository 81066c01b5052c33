#!/bin/bash
#SBATCH --cpus=2
echo "$SLURM_JOB_ID"
