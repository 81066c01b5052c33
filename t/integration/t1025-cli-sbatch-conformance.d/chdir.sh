#!/bin/bash
#SBATCH -D /tmp
#SBATCH -o chdir-%j.out
echo "$SLURM_JOB_ID"
