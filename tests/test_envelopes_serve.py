"""Ray Serve's replica prefix names the process: ``(ServeReplica:<app>:<deployment> pid=N)``
(Ray 2.7+; ``ServeReplica:<deployment>`` before), as ``(EngineCore_0 pid=N)`` and Ray's worker
prefixes do, so two replicas on one GPU are two processes (v22) and every line of a log served
through Ray Serve reads as the bare line does."""

import pytest
from conftest import fixture_path, load_manifest
from test_envelopes_pastes import _joins

from vllm_doctor import diagnose
from vllm_doctor.envelopes import unwrap

LINE = "INFO 04-22 16:24:51 llm_engine.py:322] # GPU blocks: 4499, # CPU blocks: 11915"


@pytest.mark.parametrize(
    "prefix,proc,pid",
    [
        ("(ServeReplica:model1:MyModel pid=654872) ", "ServeReplica:model1:MyModel", 654872),
        ("(ServeReplica:model2:MyModel pid=658303) ", "ServeReplica:model2:MyModel", 658303),
        ("(ServeReplica:default:VLLMDeployment pid=12, ip=10.0.0.1) ", "ServeReplica:default:VLLMDeployment", 12),
        ("(ServeReplica:VLLMDeployment pid=77) ", "ServeReplica:VLLMDeployment", 77),  # before Ray 2.7
        ("(ServeReplica:llm-app:vllm.deploy-1 pid=5) ", "ServeReplica:llm-app:vllm.deploy-1", 5),
        ("(ServeController pid=9) ", "ServeController", 9),
    ],
)
def test_a_serve_replica_prefix_names_its_process(prefix, proc, pid):
    (rec,) = unwrap("t", 1, prefix + LINE)
    assert (rec.proc, rec.pid, rec.text) == (proc, pid, "# GPU blocks: 4499, # CPU blocks: 11915")


def test_two_replicas_are_two_processes():
    a, b = (unwrap("t", 1, f"(ServeReplica:model{i}:MyModel pid={p}) {LINE}")[0] for i, p in ((1, 1), (2, 2)))
    assert a.proc != b.proc and a.pid != b.pid


def test_a_colon_in_a_message_in_parentheses_names_no_process():
    (rec,) = unwrap("t", 1, "(note: see below pid=3) text")
    assert rec.proc is None


#: Fixtures with no process prefix of their own (Ray Serve puts its prefix on each line).
CASES = [c for c in load_manifest() if "pid=" not in fixture_path(c["file"]).read_text(errors="replace")]
#: Fixtures a process prefix on every line makes another input, not the same one wrapped: the
#: verdict rests on a person's prose (stalls2: a reported hang, an error the log lacks), which a
#: process never prints, or on another wrapper that sits outside Ray's, never inside it.
NOT_COMPARABLE = {
    "v13-v0-mllama-11b-h100-max-num-seqs-128-blocks-2252-graphs-then-cut.log": "the reporter's prose line decides",
    "w04-verl-8-node-qwen25-32b-ppo-rollout-hangs-last-v0-stats-line-backticks.log": "the reporter's prose decides",
    "a11-jupyter-proxy-links-mangled-tqdm-mllama-11b-shards-loading-oom-not-shown.log": "the reporter's 'It OOMs:' decides",
    "y03-homl-compose-api-server-unrecognized-u-main-py.log": "docker compose's prefix would be outside Ray's",
}


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_a_log_under_a_serve_replica_prefix_gets_the_bare_class(case):
    """Ray prefixes each line the process printed; a line the log's copy wrapped (a terminal, an
    editor) was one line then: a log whose bare reading joins lines is not comparable."""
    path = fixture_path(case["file"])
    if _joins(case):
        pytest.skip("the bare log joins wrapped lines: the process printed each as one")
    if case["file"] in NOT_COMPARABLE:
        pytest.skip(NOT_COMPARABLE[case["file"]])
    lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
    prefixed = "\n".join(f"(ServeReplica:default:VLLMDeployment pid=4242) {line}" if line else line for line in lines)
    assert diagnose(prefixed.split("\n")).primary_class == diagnose(lines).primary_class
