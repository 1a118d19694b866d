"""Write a deterministic busy-server vLLM log of a given size, for benchmarks.

Usage: python bench/generate.py OUT.log SIZE_MIB [--seed N] [--shape busy|storm|restarts|traceback|longline|empty]

The log is shaped like a V1 server with request logging: a startup (non-default args,
engine config, weights, KV sizing, graph capture, ready), then for each request a
"Received request ... prompt: '<long prompt>'" line, an "Added request" line and an access
line, a stats line every 10 s of log time; near 70 % of the size a KV saturation episode
(KV usage >= 95 % with requests waiting over many intervals), and at the end a runtime
CUDA OOM whose message lists a co-tenant process (PID 4242) next to vLLM's own.
Every line uses the messages of shared/vllm-messages.md, so the tool recognises them.

The other shapes are the adversarial ones of issue 15, where every line is a candidate:
``storm`` (a startup, then HTTP 500 access lines), ``restarts`` (a server that restarts
over and over: its startup lines again and again), ``traceback`` (one traceback that never
ends: frames and their source lines), ``longline`` (one line of SIZE_MIB without a newline),
``empty`` (one ERROR record with nothing after its prefix, again and again: breakit4's gzip
bomb, which took 78 s for 100 MB). SIZE_MIB is the size for every shape.
"""

from __future__ import annotations

import argparse
import random

WORDS = (
    "the quick brown fox jumps over the lazy dog while the model reads a long "
    "context about memory, caches, tokens and schedulers in a busy inference server"
).split()


def stamp(t: int) -> str:
    h, m, s = (t // 3600) % 24, (t // 60) % 60, t % 60
    return f"11-30 {h:02d}:{m:02d}:{s:02d}"


def startup(t: int):
    P = "(APIServer pid=1) "
    E = "(EngineCore_DP0 pid=77) "
    yield f"{P}INFO {stamp(t)} [api_server.py:1885] vLLM API server version 0.11.0"
    yield (
        f"{P}INFO {stamp(t)} [utils.py:328] non-default args: {{'model_tag': 'meta-llama/Llama-3.1-8B-Instruct', "
        f"'model': 'meta-llama/Llama-3.1-8B-Instruct', 'max_model_len': 32768, 'gpu_memory_utilization': 0.9, "
        f"'enable_log_requests': True}}"
    )
    yield (
        f"{E}INFO {stamp(t)} [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: "
        f"model='meta-llama/Llama-3.1-8B-Instruct', dtype=torch.bfloat16, max_seq_len=32768, "
        f"tensor_parallel_size=1, pipeline_parallel_size=1, quantization=None, enforce_eager=False, kv_cache_dtype=auto"
    )
    yield f"{E}INFO {stamp(t)} [gpu_model_runner.py:2602] Starting to load model meta-llama/Llama-3.1-8B-Instruct..."
    yield f"{E}INFO {stamp(t)} [gpu_model_runner.py:2634] Model loading took 14.99 GiB and 4.200000 seconds"
    yield f"{E}INFO {stamp(t)} [gpu_worker.py:298] Available KV cache memory: 5.62 GiB"
    yield f"{E}INFO {stamp(t)} [kv_cache_utils.py:1087] GPU KV cache size: 46,032 tokens"
    yield f"{E}INFO {stamp(t)} [kv_cache_utils.py:1091] Maximum concurrency for 32,768 tokens per request: 1.40x"
    yield f"{E}INFO {stamp(t)} [gpu_model_runner.py:3480] Graph capturing finished in 7 secs, took 0.52 GiB"
    yield f"{E}INFO {stamp(t)} [core.py:210] init engine (profile, create kv cache, warmup model) took 31.50 seconds"
    yield f"{P}INFO:     Application startup complete."


def adversarial(shape: str, out: str, size_mib: float) -> None:
    """Write one of the every-line-a-candidate shapes (see the module docstring)."""
    target = int(size_mib * 2**20)
    P = "(APIServer pid=1) "
    with open(out, "w", encoding="utf-8") as fh:
        written = 0

        def w(line: str) -> None:
            nonlocal written
            fh.write(line + "\n")
            written += len(line) + 1

        if shape == "longline":
            line = "x" * 2**20
            for _ in range(int(size_mib)):
                fh.write(line)
            return
        if shape == "storm":
            for line in startup(0):
                w(line)
            n = 0
            while written < target:
                n += 1
                w(
                    f'{P}INFO:     10.0.{n % 250}.{n % 7 + 1}:{40000 + n % 20000} - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error'
                )
        elif shape == "restarts":
            t = 0
            while written < target:
                t += 7
                for line in startup(t):
                    w(line)
                w(f"{P}INFO {stamp(t)} [launcher.py:99] Shutting down FastAPI HTTP server.")
        elif shape == "traceback":
            E = "(EngineCore_DP0 pid=77) "
            w(f"{E}ERROR 11-30 10:00:00 [core.py:710] EngineCore encountered a fatal error.")
            w(f"{E}ERROR 11-30 10:00:00 [core.py:710] Traceback (most recent call last):")
            while written < target:
                w(
                    f'{E}ERROR 11-30 10:00:00 [core.py:710]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 701, in run_engine_core'
                )
                w(f"{E}ERROR 11-30 10:00:00 [core.py:710]     engine_core.run_busy_loop()")
        elif shape == "empty":
            while written < target:
                w("ERROR 05-01 10:00:12 [core.py:700] ")
        else:
            raise SystemExit(f"unknown shape {shape!r}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("size_mib", type=float)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--shape", default="busy", choices=["busy", "storm", "restarts", "traceback", "longline", "empty"])
    a = ap.parse_args()
    if a.shape != "busy":
        adversarial(a.shape, a.out, a.size_mib)
        return
    rnd = random.Random(a.seed)
    target = int(a.size_mib * 2**20)
    storm_at, storm_len = int(target * 0.70), int(target * 0.02)
    written = 0
    t = 0
    req = 0
    P = "(APIServer pid=1) "
    with open(a.out, "w", encoding="utf-8") as fh:

        def w(line: str) -> None:
            nonlocal written
            fh.write(line + "\n")
            written += len(line) + 1

        for line in startup(t):
            w(line)
        next_stats = 10
        while written < target - 4096:
            req += 1
            t += rnd.choice((0, 0, 1))
            prompt = " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(40, 160)))
            rid = f"chatcmpl-{req:016x}"
            w(
                f"{P}INFO {stamp(t)} [logger.py:49] Received request {rid}: prompt: '{prompt}', params: "
                f"SamplingParams(n=1, temperature=0.7, top_p=0.95, max_tokens=512), lora_request: None."
            )
            w(f"{P}INFO {stamp(t)} [async_llm.py:382] Added request {rid}.")
            w(
                f'{P}INFO:     10.0.{req % 250}.{req % 7 + 1}:{40000 + req % 20000} - "POST /v1/chat/completions HTTP/1.1" 200 OK'
            )
            if t >= next_stats:
                next_stats = t + 10
                in_storm = storm_at <= written < storm_at + storm_len
                kv = rnd.uniform(95.5, 99.9) if in_storm else rnd.uniform(20.0, 60.0)
                waiting = rnd.randint(10, 60) if in_storm else 0
                w(
                    f"{P}INFO {stamp(t)} [loggers.py:123] Engine 000: Avg prompt throughput: {rnd.uniform(500, 3000):.1f} "
                    f"tokens/s, Avg generation throughput: {rnd.uniform(300, 900):.1f} tokens/s, Running: "
                    f"{rnd.randint(8, 40)} reqs, Waiting: {waiting} reqs, GPU KV cache usage: {kv:.1f}%, "
                    f"Prefix cache hit rate: {rnd.uniform(30, 50):.1f}%"
                )
        E = "(EngineCore_DP0 pid=77) "
        w(f"{E}ERROR {stamp(t)} [core.py:710] EngineCore encountered a fatal error.")
        w(f"{E}ERROR {stamp(t)} [core.py:710] Traceback (most recent call last):")
        w(
            f'{E}ERROR {stamp(t)} [core.py:710]   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 701, in run_engine_core'
        )
        w(f"{E}ERROR {stamp(t)} [core.py:710]     engine_core.run_busy_loop()")
        w(
            f"{E}ERROR {stamp(t)} [core.py:710] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.25 GiB. "
            f"GPU 0 has a total capacity of 23.56 GiB of which 412.00 MiB is free. Process 4242 has 2.50 GiB memory in use. "
            f"Including non-PyTorch memory, this process has 20.60 GiB memory in use. Of the allocated memory 19.80 GiB is "
            f"allocated by PyTorch, and 310.00 MiB is reserved by PyTorch but unallocated."
        )
        w(f"{P}ERROR {stamp(t)} [async_llm.py:699] AsyncLLM output_handler failed.")


if __name__ == "__main__":
    main()
