#!/bin/bash
#SBATCH -w n[1-2]
echo "$SLURM_JOB_ID"
