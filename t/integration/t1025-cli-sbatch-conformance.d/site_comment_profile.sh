#!/bin/bash
#SBATCH --comment=hello
#SBATCH --profile=none
#SBATCH --acctg-freq=task=30
echo "$SLURM_JOB_ID"
