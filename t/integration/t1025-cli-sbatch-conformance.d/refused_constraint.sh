#!/bin/bash
#SBATCH -C avx2
echo "$SLURM_JOB_ID"
