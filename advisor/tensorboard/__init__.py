"""advisor inside TensorBoard: an Advisor tab beside the Profile tab (`plugin.py`, registered through
the `tensorboard_plugins` entry point), and the same pages without TensorBoard (`advisor serve`).

One WSGI app (`app.py`) serves both. It lists the profile runs of a logdir (`runs.py`) without
reading them; a run is analyzed when opened, in a worker process (`jobs.py`, `worker.py`), and the
result is kept in the user's cache directory (`cache.py`), never in the logdir.
"""
