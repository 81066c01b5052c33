#!/bin/bash
#SBATCH --container=/tmp/bundle
echo "$SLURM_JOB_ID"
