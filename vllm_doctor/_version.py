"""The version of vllm-log-doctor (one place; the package and the CLI read it)."""

__version__ = "0.1.0"
