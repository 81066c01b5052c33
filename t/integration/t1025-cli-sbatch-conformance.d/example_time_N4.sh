#!/bin/sh
# ARGS: -N4
#SBATCH --time=1
srun hostname |sort
