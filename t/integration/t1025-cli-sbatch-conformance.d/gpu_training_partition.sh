#!/bin/bash
#SBATCH -J train
#SBATCH -p debug
#SBATCH -t 8:00:00
#SBATCH --cpus-per-task=2
#SBATCH --mem=900
echo "$SLURM_JOB_ID"
