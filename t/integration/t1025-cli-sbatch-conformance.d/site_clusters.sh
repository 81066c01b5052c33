#!/bin/bash
#SBATCH -M mycluster
echo "$SLURM_JOB_ID"
