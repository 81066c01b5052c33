#!/bin/bash
#SBATCH --export=NONE
echo "$SLURM_JOB_ID"
