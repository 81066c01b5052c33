#!/bin/bash
# ARGS: -N 3 -t 45 --mem=300
#SBATCH -N 1
#SBATCH -t 10
#SBATCH --mem=100
hostname
