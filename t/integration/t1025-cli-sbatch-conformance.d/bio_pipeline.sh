#!/bin/bash
#SBATCH -J bwa_align
#SBATCH -N 1
#SBATCH -n 1
#SBATCH -c 2
#SBATCH --mem=800
#SBATCH -t 2-00:00:00
#SBATCH -o %x_%j.log
#SBATCH --mail-type=ALL
#SBATCH --mail-user=me@example.org
echo "$SLURM_JOB_ID"
