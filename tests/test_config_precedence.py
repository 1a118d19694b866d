"""A value vLLM prints outranks one a pasted launch command gave (v13: a prose command with
``--max-model-len 32``, then vLLM's own "Maximum concurrency for 512 tokens per request")."""

import pytest

from vllm_doctor import diagnose

V0 = "INFO 10-24 18:12:39 gpu_executor.py:126] Maximum concurrency for 512 tokens per request: 70.38x"
V1 = "(EngineCore_DP0 pid=7) INFO 10-24 18:12:39 [kv_cache_utils.py:1091] Maximum concurrency for 512 tokens per request: 3.50x"


@pytest.mark.parametrize("printed", [V0, V1], ids=["v0", "v1"])
@pytest.mark.parametrize(
    "command",
    [
        "vllm serve /models/Llama-3.2-11B-Vision --max-model-len 32",
        "python -m vllm.entrypoints.openai.api_server --model m --max-model-len 32",
        "docker run --gpus all vllm/vllm-openai:v0.6.3 --model m --max-model-len 32",
        "vllm serve m --max-model-len 32 && vllm serve m --max-model-len 512 --max-num-seqs 128",
        None,
    ],
)
def test_the_printed_max_model_len_wins_over_the_command(command, printed):
    lines = ([command] if command else []) + [
        "INFO 10-24 18:10:17 model_runner.py:1067] Loading model weights took 19.8557 GB",
        printed,
    ]
    (run,) = diagnose(lines).to_dict()["runs"]
    assert run["config"]["max_model_len"] == 512


def test_a_command_alone_gives_its_value():
    (run,) = diagnose(
        [
            "vllm serve m --max-model-len 32",
            "INFO 10-24 18:10:17 model_runner.py:1067] Loading model weights took 19.8557 GB",
        ]
    ).to_dict()["runs"]
    assert run["config"]["max_model_len"] == 32
