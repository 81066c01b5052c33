#!/bin/bash
# ARGS: -w n[2-3] : -w n4
srun hostname
