#!/bin/bash
#SBATCH --export=ALL,FOO=bar
echo "$SLURM_JOB_ID"
