#!/bin/bash
#SBATCH --gres-flags=enforce-binding
echo "$SLURM_JOB_ID"
