#!/bin/bash
#SBATCH --cluster-constraint=x
echo "$SLURM_JOB_ID"
