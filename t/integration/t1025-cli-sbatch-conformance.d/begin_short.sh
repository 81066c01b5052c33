#!/bin/bash
#SBATCH -b now+600
echo "$SLURM_JOB_ID"
