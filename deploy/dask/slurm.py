"""Grade a class on a SLURM cluster with dask-jobqueue: each job is one single-threaded Dask worker.

    pip install dask-jobqueue       # in the course's environment, on a file system the nodes share
    python deploy/dask/slurm.py submitted --out grades --workers 20 --queue cpu

The scheduler runs in this process, here (a login node); each job runs this very Python, so every
worker holds the same course. Without a SLURM cluster, see deploy/README.md for plain commands.
"""
import argparse
import subprocess
import sys

import dask
from dask_jobqueue import SLURMCluster

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("submitted", help="nbgrader's submitted/ folder: STUDENT/ASSIGNMENT/NOTEBOOK.ipynb")
parser.add_argument("--out", required=True, help="where grades.csv, the report and the feedback go")
parser.add_argument("--workers", type=int, default=10, help="SLURM jobs, one notebook at a time each")
parser.add_argument("--queue", help="the partition (sbatch -p)")
parser.add_argument("--account", help="the account to charge (sbatch -A)")
parser.add_argument("--walltime", default="02:00:00")
parser.add_argument("--interface", help="the network interface the nodes reach this machine on (ib0, eth0)")
args = parser.parse_args()

# a notebook whose worker dies (a node lost, a job out of time) is graded once more, then reported
dask.config.set({"distributed.scheduler.allowed-failures": 1})
cluster = SLURMCluster(
    cores=1, processes=1,  # one thread: a worker grades one notebook at a time
    memory="6GB",          # the grader gives each kernel 4 GiB (--memory-mb)
    walltime=args.walltime, queue=args.queue, account=args.account, interface=args.interface,
    python=sys.executable,
    job_script_prologue=["export OMP_NUM_THREADS=1"],
)
try:
    cluster.scale(jobs=args.workers)
    code = subprocess.call([sys.executable, "-m", "autograder", "grade", args.submitted, "--out", args.out,
                            "--cluster", cluster.scheduler_address])
finally:
    cluster.close()
sys.exit(code)
