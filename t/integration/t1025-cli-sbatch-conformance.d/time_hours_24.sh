#!/bin/bash
#SBATCH -t 00-24:00
echo "$SLURM_JOB_ID"
