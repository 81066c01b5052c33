#!/bin/bash
#SBATCH -J myjob
#SBATCH -o out-%j.txt
#SBATCH -e err-%j.txt
echo "$SLURM_JOB_ID"
