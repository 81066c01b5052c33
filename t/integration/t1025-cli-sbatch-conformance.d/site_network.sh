#!/bin/bash
#SBATCH --network=sn_all
echo "$SLURM_JOB_ID"
