#!/bin/bash
#SBATCH --mincpus=2
echo "$SLURM_JOB_ID"
