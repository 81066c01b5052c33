#!/bin/bash
#SBATCH --array=1-10%3
#SBATCH -c 1
#SBATCH --mem-per-cpu=100
#SBATCH -o sample_%A_%a.out
#SBATCH -e sample_%A_%a.err
#SBATCH -t 0-02:00
echo "$SLURM_JOB_ID"
