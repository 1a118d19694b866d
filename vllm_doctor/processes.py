"""The names vLLM gives its processes, and what each name tells: one place for all of them.

vLLM prefixes every line a child process writes with ``(NAME pid=N)`` (``_add_prefix`` /
``decorate_logs`` in ``vllm/utils``; ``shared/vllm-messages.md`` section 0, item 4). The
names changed over time:

* V0: ``VllmWorkerProcess`` (multiprocessing workers), Ray's ``RayWorkerWrapper`` /
  ``RayWorkerVllm``;
* V1 about v0.8-v0.10.1: ``VllmWorker rank=N`` (EngineCore had no prefix then);
* V1 about v0.10.1: ``EngineCore_0``, ``APIServer``; from about v0.10.2: ``EngineCore_DP0``,
  ``Worker_TP0``, ``Worker_TP1_EP1``, ``Worker``, ``ApiServer_0``; newest: ``EngineCore``;
* ``WorkerProc`` and ``WorkerDict`` appear in Ray-based launchers.
"""

from __future__ import annotations

from typing import Optional

#: Name prefixes of vLLM's own processes.
VLLM_PROCESS_NAMES = (
    "APIServer",
    "ApiServer",
    "EngineCore",
    "VllmWorker",
    "Worker",
    "RayWorkerWrapper",
    "RayWorkerVllm",
    "RayWorkerProc",
    "WorkerProc",
    "WorkerDict",
)
#: Processes whose failure takes the engine down (not the API server's request handling).
ENGINE_PROCESS_NAMES = ("EngineCore", "Worker", "VllmWorker", "RayWorker", "WorkerDict", "WorkerProc")
_V1_NAMES = ("EngineCore", "APIServer", "ApiServer", "Worker_TP")


#: Packages of vLLM itself and of its platform plugins and forks, as they appear in a frame's
#: path: a traceback through them is vLLM output (vllm-omni's diffusion workers, vllm-ascend,
#: vllm-gaudi and its HPU extension, tpu-inference, vllm-metax).
VLLM_PATHS = ("/vllm/", "/vllm_omni/", "/vllm_ascend/", "/vllm_gaudi/", "/vllm_hpu_extension/", "/tpu_inference/")


def is_vllm_path(path: str) -> bool:
    """True when a traceback frame's file ``path`` is in vLLM or one of its plugins
    (:data:`VLLM_PATHS`)."""
    return any(p in path for p in VLLM_PATHS)


def is_vllm_process(name: Optional[str]) -> bool:
    """True when ``name`` (a process prefix's name) is one of vLLM's own processes."""
    return bool(name) and name.startswith(VLLM_PROCESS_NAMES)


def is_engine_process(name: Optional[str]) -> bool:
    """True for the engine and its workers, whose errors are fatal to the server."""
    return bool(name) and name.startswith(ENGINE_PROCESS_NAMES)


#: Local multiprocessing workers, which pick their GPU as cuda:<local rank> (Ray's workers
#: each see one GPU, as index 0, so they are not among them).
LOCAL_WORKER_NAMES = ("VllmWorker", "Worker_TP", "Worker")


def is_worker_process(name: Optional[str]) -> bool:
    """True for a local multiprocessing worker (``VllmWorkerProcess``, ``VllmWorker rank=N``,
    ``Worker_TP1``): its GPU index is its local rank."""
    return bool(name) and name.startswith(LOCAL_WORKER_NAMES)


def engine_of_process(name: Optional[str], rank: Optional[int]) -> Optional[str]:
    """``v1`` / ``v0`` when the process name alone tells which engine printed it, else None.

    ``VllmWorker`` with a ``rank=`` is V1 (about v0.8-v0.10.1); ``VllmWorkerProcess`` is V0.
    """
    if not name:
        return None
    if name.startswith(_V1_NAMES) or (rank is not None and name.startswith("VllmWorker")):
        return "v1"
    if name == "VllmWorkerProcess":
        return "v0"
    return None


#: RL frameworks that run vLLM inside their own processes, next to the model being trained
#: (colocated): the names of their processes that print vLLM's lines, and the path of their
#: package in traceback frames. Sources: verl's fused ``WorkerDict`` Ray actor (actor, rollout
#: and reference in one process); OpenRLHF's ``ActorModelRayActor`` / ``LLMRayActor``; TRL's
#: ``trl/trainer`` (GRPO with ``vllm_mode="colocate"``); ms-swift's ``swift/`` rollout;
#: SkyRL's ``skyrl`` packages.
TRAINER_PROCESSES = {
    "WorkerDict": "verl",  # actor, rollout and reference in one process (the hybrid engine)
    "ActorModelRayActor": "OpenRLHF",  # the training actor (LLMRayActor, the engine alone, is no proof)
    "PolicyModelRayActor": "OpenRLHF",
}
#: The frameworks' own sub-packages (a directory merely named ``swift`` or ``verl`` is not one).
TRAINER_PATHS = {
    "/verl/workers/": "verl",
    "/verl/trainer/": "verl",
    "/verl/single_controller/": "verl",
    "/openrlhf/trainer/": "OpenRLHF",
    "/openrlhf/cli/": "OpenRLHF",
    "/trl/trainer/": "TRL",
    "/swift/trainers/": "ms-swift",
    "/swift/llm/": "ms-swift",
    "/swift/cli/": "ms-swift",
    "/skyrl_train/": "SkyRL",
}


_TRAINER_NAMES = tuple(TRAINER_PROCESSES)


def trainer_of(proc: Optional[str] = None, path: str = "") -> Optional[str]:
    """The RL framework a process name or a frame's file path belongs to (see
    :data:`TRAINER_PROCESSES`, :data:`TRAINER_PATHS`), or None."""
    if proc and proc.startswith(_TRAINER_NAMES):  # one C call for the common case, no trainer
        return next(fw for name, fw in TRAINER_PROCESSES.items() if proc.startswith(name))
    if path:
        for part, framework in TRAINER_PATHS.items():
            if part in path:
                return framework
    return None


#: Words of a Ray actor's class or method that may be vLLM's side of an RL job (a rollout
#: worker, an inference engine, a generate call): such an actor is never called foreign.
_ENGINE_SIDE_WORDS = ("vllm", "rollout", "generat", "inference", "llm", "engine", "sampl", "serve")
#: Words of a trainer's Ray actor class (SkyRL's ``FSDPPolicyWorkerBase``, OpenRLHF's
#: ``ActorModelRayActor`` / ``CriticModelRayActor`` / ``ReferenceModelRayActor``, verl's
#: ``CriticWorker``, a ``Trainer`` / ``Learner``).
_TRAINER_WORDS = (
    "fsdp",
    "megatron",
    "deepspeed",
    "policy",
    "critic",
    "trainer",
    "learner",
    "reward",
    "actormodel",
    "referencemodel",
    "refmodel",
    "optimizer",
)


def vllm_actor(cls: str, method: str = "", module: str = "") -> Optional[bool]:
    """Whose Ray actor ``ray::cls.method()`` is (Ray's ``RayTaskError`` / ``ActorDiedError``
    text, ``repr=<module.Class object at 0x..>`` giving ``module``): True for vLLM's (a vLLM
    class or package: ``RayWorkerWrapper``, ``vllm.executor.ray_utils``, SkyRL's
    ``AsyncVLLMInferenceEngine``), False for an application's (a package path with no vLLM in
    it, or a trainer's class name: :data:`_TRAINER_WORDS`), None when it cannot be told (a word
    of vLLM's side of an RL job, :data:`_ENGINE_SIDE_WORDS`: verl's ``WorkerDict`` runs its
    rollout's vLLM under ``actor_rollout_*`` methods)."""
    words = f"{cls} {method} {module}".lower()
    if "vllm" in words or is_vllm_process(cls):
        return True
    if any(w in words for w in _ENGINE_SIDE_WORDS):
        return None
    if module or any(w in cls.lower() for w in _TRAINER_WORDS):
        return False
    return None
