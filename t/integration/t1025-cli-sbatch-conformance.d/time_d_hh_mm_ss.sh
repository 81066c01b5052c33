#!/bin/bash
#SBATCH -t 1-02:03:04
echo "$SLURM_JOB_ID"
