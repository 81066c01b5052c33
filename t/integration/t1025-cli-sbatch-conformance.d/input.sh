#!/bin/bash
#SBATCH -i /dev/null
echo "$SLURM_JOB_ID"
