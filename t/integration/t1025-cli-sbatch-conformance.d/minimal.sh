#!/bin/bash
echo "$SLURM_JOB_ID"
