#!/bin/bash
#SBATCH --dependency=afterany:@BASE@
echo "$SLURM_JOB_ID"
