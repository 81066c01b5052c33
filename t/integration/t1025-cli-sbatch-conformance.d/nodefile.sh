#!/bin/bash
#SBATCH -F @DIR@/nodefile.txt
echo "$SLURM_JOB_ID"
