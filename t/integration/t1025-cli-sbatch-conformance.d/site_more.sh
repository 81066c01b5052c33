#!/bin/bash
#SBATCH --oversubscribe
#SBATCH --power=level
#SBATCH --reboot
#SBATCH --priority=10
#SBATCH --thread-spec=1
echo "$SLURM_JOB_ID"
