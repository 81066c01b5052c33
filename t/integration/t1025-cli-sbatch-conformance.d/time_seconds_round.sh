#!/bin/bash
#SBATCH -t 00:00:59
echo "$SLURM_JOB_ID"
