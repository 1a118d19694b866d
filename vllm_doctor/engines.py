"""Which vLLM engine (V0 or V1) a record's source file proves.

vLLM's record prefix names the file that logged it (``ERROR 05-06 18:20:49 [engine.py:448]``):
some files exist in one engine only, so the file alone tells the engine where nothing else in
the log does (hunt9 v19: a V0 ``MQLLMEngine`` record read as V1, and V1's defaults quoted).

Read from the releases' own source (/work/cache/vllm/<ver>/vllm, 0.5.5 to 0.33.0), listing the
files of each basename that call the logger:

* V0 only: ``engine.py`` (``engine/multiprocessing/engine.py``, MQLLMEngine, to 0.10),
  ``multiproc_worker_utils.py`` and ``async_llm_engine.py`` (to 0.10), ``gpu_executor.py``,
  ``multiproc_gpu_executor.py``, ``ray_gpu_executor.py`` (to 0.6); ``model_runner.py`` and
  ``worker.py`` (``worker/``, to 0.10: from 0.11 a ``model_runner.py`` is V1's optional second
  runner and a ``worker.py`` a KV-offload helper, both printed beside V1's own files, whose
  evidence wins in :attr:`vllm_doctor.run.Run.engine`);
* V1 only: ``core.py``, ``core_client.py``, ``async_llm.py`` (``v1/engine/``),
  ``gpu_model_runner.py``, ``gpu_worker.py`` (``v1/worker/``), ``loggers.py``
  (``v1/metrics/``), ``kv_cache_utils.py`` (``v1/core/``), ``multiproc_executor.py``
  (``v1/executor/``);
* both, so no proof: ``llm_engine.py`` (``engine/`` and ``v1/engine/`` to 0.10), ``metrics.py``
  (V0's ``engine/metrics.py``, V1's ``v1/spec_decode/metrics.py``), ``utils.py`` and the rest.
"""

from __future__ import annotations

from typing import Optional

#: Record files only V0 logs from (see the module docstring).
V0_FILES = frozenset(
    {
        "engine.py",
        "multiproc_worker_utils.py",
        "async_llm_engine.py",
        "gpu_executor.py",
        "multiproc_gpu_executor.py",
        "ray_gpu_executor.py",
        "model_runner.py",
        "worker.py",
    }
)
#: Record files only V1 logs from.
V1_FILES = frozenset(
    {
        "core.py",
        "core_client.py",
        "async_llm.py",
        "gpu_model_runner.py",
        "gpu_worker.py",
        "loggers.py",
        "kv_cache_utils.py",
        "multiproc_executor.py",
    }
)


def engine_of_record(file: Optional[str]) -> Optional[str]:
    """``v0`` / ``v1`` when the record's source file (``engine.py:448``, ``[core.py:74]``, a
    path ending in one) exists in one engine only, else None."""
    if not file:
        return None
    name = file.strip("[]").rsplit(":", 1)[0].rsplit("/", 1)[-1]
    if name in V0_FILES:
        return "v0"
    if name in V1_FILES:
        return "v1"
    return None
