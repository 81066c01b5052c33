#!/bin/bash
#SBATCH --ntasks-per-socket=1
#SBATCH --ntasks-per-core=1
#SBATCH --threads-per-core=1
#SBATCH --sockets-per-node=1
#SBATCH --cores-per-socket=2
#SBATCH -B 1:2:1
echo "$SLURM_JOB_ID"
