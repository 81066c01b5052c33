#!/bin/bash
#SBATCH -H
echo "$SLURM_JOB_ID"
