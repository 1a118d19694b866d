"""A traceback through vLLM or one of its plugins is vLLM output, whatever prefixes the lines.

hunt5 m23: a vllm-omni diffusion worker's traceback under Buildkite's ``bk;t=`` prefix gave a
verdict and yet exit 3, "nothing recognisable as vLLM output": only ``/vllm/`` counted.
"""

import pytest

from vllm_doctor import diagnose
from vllm_doctor.processes import VLLM_PATHS, is_vllm_path


@pytest.mark.parametrize("package", [p.strip("/") for p in VLLM_PATHS])
def test_a_traceback_through_a_vllm_package_is_vllm_output(package):
    lines = [
        "Process Worker-0:",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
        f'  File "/usr/local/lib/python3.12/dist-packages/{package}/worker/gpu_worker.py", line 701, in worker_main',
    ]
    v = diagnose(lines, name="cut.log")
    assert v.to_dict()["exit_code"] == 1
    assert v.primary_class == "unknown"


def test_a_traceback_only_through_other_code_is_not_vllm_output():
    lines = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/site-packages/myapp/vllm_client.py", line 3, in main',
        '  File "/usr/lib/python3.12/site-packages/myapp/vllm_utils/x.py", line 9, in run',
    ]
    assert diagnose(lines, name="other.log").to_dict()["exit_code"] == 3
    assert not is_vllm_path("/srv/vllmx/app.py") and is_vllm_path("/opt/vllm_ascend/worker/model_runner.py")
