"""The benchmark suite: ``bench/run`` (``python -m bench``). See ``bench/README.md``."""
