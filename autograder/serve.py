"""Run a Jupyter server's module, the way ``python -m MODULE ARGS`` would, in a process that goes without the
IRI grammar (``autograder/__init__.py``): ``python -m autograder.serve jupyterhub.singleuser --allow-root``.

Half of a Jupyter server's start is that one import (2.3 s of 4.8 s of imports, measured on a 2-core machine).
The local hub (``deploy/local/jupyterhub_config.py``) starts the formgrader this way: a hub gives a service it
starts about 10 s to answer, then exits, and on a busy machine the formgrader took longer.
"""
import runpy
import sys

if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    del sys.argv[0]  # ARGS follow the module's name, as after `python -m MODULE`
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
