#!/bin/bash
#SBATCH --dependency=afternotok:@BASE@
echo "$SLURM_JOB_ID"
