#!/bin/bash
#SBATCH --job-name=gauss
#SBATCH --nodes=1
#SBATCH --ntasks=2
#SBATCH --mem-per-cpu=250
#SBATCH --time=12:00:00
#SBATCH --account=chem
#SBATCH --qos=normal
echo "$SLURM_JOB_ID"
