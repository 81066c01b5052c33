#!/bin/sh
# ARGS: -N4
# STDIN
srun hostname |sort
