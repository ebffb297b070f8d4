"""Scripts that tests run in fresh Python processes (a new process is needed
to configure devices, to measure memory, or to kill and restart a run).

Each is run as `python tests/workers/<name>.py ...` by the test named in its
docstring; keras_resume_worker is also imported by the Keras tests (as
`workers.keras_resume_worker`) to build the same run in process.
Those that share test machinery put tests/ on their sys.path first and
import it from support/ (sharded_worker: support.helpers; the two
distributed Keras workers: support.distributed_logistic).
"""
