"""wrappers7: Ray Serve's own log format (its replica, controller and proxy file loggers and,
under the actor prefix, their stderr), the engine arguments a framework prints as a dataclass
repr, vLLM's record prefix as proof of vLLM output, and a client's transcript of a rejected
request."""

import pytest
from conftest import fixture_path

from vllm_doctor import diagnose
from vllm_doctor.envelopes import unwrap

# -- Ray Serve's LoggingConfig text format ----------------------------------------------------

#: ray/serve/_private/logging_utils.py ServeFormatter: level, asctime (comma millis), component,
#: its id, [request id, route,] file:line, " - ". Ray docs (serve/monitoring.md) for each shape.
SERVE_LINES = [
    # a replica's file logger (a25, Ray 2.x): deployment "app_deployment", replica id
    (
        "INFO 2024-11-18 01:46:34,210 default_VLLMDeployment ujj4diu5 replica.py:893 - Started initializing replica.",
        dict(text="Started initializing replica.", time="11-18 01:46:34", file="replica.py"),
        ("default_VLLMDeployment", "ujj4diu5"),
    ),
    # inside a request: its id and route before the file
    (
        "INFO 2024-02-27 17:07:51,183 default_SayHello 9cbc3sdd e14e6473-1c26-4d40-8bc6-2b0a8c4d8c35 / "
        "replica.py:373 - __CALL__ OK 0.4ms",
        dict(text="__CALL__ OK 0.4ms", time="02-27 17:07:51", file="replica.py"),
        ("default_SayHello", "9cbc3sdd"),
    ),
    (
        "WARNING 2024-05-01 10:00:00,001 default_VLLMDeployment abcd1234 7f3a-11 /v1/chat/completions "
        "serving_chat.py:120 - request rejected",
        dict(text="request rejected", time="05-01 10:00:00", file="serving_chat.py"),
        ("default_VLLMDeployment", "abcd1234"),
    ),
    # the controller (its PID) and the proxy (its IP)
    (
        "INFO 2022-08-02 16:16:29,881 controller 71139 deployment_state.py:1232 - Adding 1 replicas to deployment 'SayHello'.",
        dict(text="Adding 1 replicas to deployment 'SayHello'.", time="08-02 16:16:29", file="deployment_state.py"),
        ("controller", "71139"),
    ),
    (
        "INFO 2022-08-02 16:17:02,502 http_proxy 127.0.0.1 http_proxy.py:315 - GET / 200 3.5ms",
        dict(text="GET / 200 3.5ms", time="08-02 16:17:02", file="http_proxy.py"),
        ("http_proxy", "127.0.0.1"),
    ),
    # before Ray 2.7 the replica id was "Deployment#suffix"; before 1.13 no file was printed
    (
        "ERROR 2022-08-02 16:17:02,501 SayHello SayHello#kKGBoa monitoring.py:13 - Hello world!",
        dict(text="Hello world!", time="08-02 16:17:02", file="monitoring.py"),
        ("SayHello", "SayHello#kKGBoa"),
    ),
    (
        "INFO 2021-06-01 09:00:00,000 SayHello SayHello#kKGBoa - HANDLE __call__ OK 0.3ms",
        dict(text="HANDLE __call__ OK 0.3ms", time="06-01 09:00:00", file=None),
        ("SayHello", "SayHello#kKGBoa"),
    ),
]


@pytest.mark.parametrize("line,want,source", SERVE_LINES, ids=[w["text"][:24] for _, w, _ in SERVE_LINES])
def test_a_ray_serve_record_prefix_is_peeled(line, want, source):
    (rec,) = unwrap("t", 1, line)
    assert {k: getattr(rec, k) for k in want} == want
    assert (rec.wrapper, rec.unit, rec.host) == ("ray-serve", *source)
    # Serve's logger, not vLLM's: its level is the application's, the record is not vLLM's own
    assert rec.level is None and not rec.vllm_header


def test_under_the_actor_prefix_the_process_is_the_actor():
    line = "(ServeReplica:SayHello pid=71162) INFO 2022-08-02 16:17:02,501 SayHello SayHello#kKGBoa replica.py:482 - OK"
    (rec,) = unwrap("t", 1, line)
    assert (rec.text, rec.proc, rec.pid, rec.file, rec.time) == (
        "OK",
        "ServeReplica:SayHello",
        71162,
        "replica.py",
        "08-02 16:17:02",
    )


def test_vllms_own_record_beneath_serves_prefix_is_vllms():
    line = (
        "INFO 2024-11-18 01:46:40,000 default_VLLMDeployment ujj4diu5 logging.py:1 - "
        "INFO 11-18 01:46:40 llm_engine.py:250] # GPU blocks: 4499, # CPU blocks: 11915"
    )
    (rec,) = unwrap("t", 1, line)
    assert (rec.text, rec.level, rec.file, rec.vllm_header) == (
        "# GPU blocks: 4499, # CPU blocks: 11915",
        "INFO",
        "llm_engine.py",
        True,
    )


def test_a_serve_record_glued_after_a_code_fence_is_split_off():
    recs = unwrap("t", 1, "```INFO 2024-11-18 01:46:34,210 default_VLLMDeployment ujj4diu5 replica.py:893 - Started.")
    assert [r.text for r in recs] == ["```", "Started."]
    assert recs[1].file == "replica.py"


@pytest.mark.parametrize(
    "line",
    [
        # vLLM's own prefix (no year) and an ordinary application logger are not Serve's
        "INFO 11-18 01:46:34 llm_engine.py:250] # GPU blocks: 4499",
        "INFO 2024-11-18 01:46:34,210 just words here",
        "INFO 2024-11-18 01:46:34 default_X abc replica.py:1 - no millis",
    ],
)
def test_other_shapes_are_not_serves(line):
    (rec,) = unwrap("t", 1, line)
    assert rec.wrapper != "ray-serve"


def test_a_log_in_serves_format_reads_as_the_bare_log():
    """vLLM's startup lines as a replica's file logger writes them read as vLLM's do bare."""
    bare = [
        "INFO 11-18 01:46:40 llm_engine.py:237] Initializing an LLM engine (v0.6.3.post1) with config: "
        "model='m', max_seq_len=8192, tensor_parallel_size=1, enforce_eager=False,",
        "INFO 11-18 01:47:00 gpu_executor.py:122] # GPU blocks: 4499, # CPU blocks: 2048",
    ]
    served = [
        "INFO 2024-11-18 01:46:40,000 default_VLLMDeployment ujj4diu5 llm_engine.py:237 - "
        + bare[0].split("] ", 1)[1],
        "INFO 2024-11-18 01:47:00,000 default_VLLMDeployment ujj4diu5 gpu_executor.py:122 - "
        + bare[1].split("] ", 1)[1],
    ]
    a, b = diagnose(bare), diagnose(served)
    assert a.primary_class == b.primary_class
    assert a.to_dict()["runs"][0]["config"] == b.to_dict()["runs"][0]["config"]


# -- engine arguments as a dataclass repr -----------------------------------------------------

A25 = "a25-ray-serve-replica-log-format-deployment-replica-id-v063-engine-args-startup-cut.log"


def _config(lines):
    return diagnose(lines).to_dict()["runs"][0]["config"]


def test_a25_reads_the_engine_args_of_its_serve_replica():
    config = diagnose(fixture_path(A25)).to_dict()["runs"][0]["config"]
    assert (config["gpu_memory_utilization"], config["tensor_parallel_size"], config["max_num_seqs"]) == (0.9, 1, 256)


@pytest.mark.parametrize("cls", ["AsyncEngineArgs", "EngineArgs"])
def test_vllms_own_printout_wins_over_the_engine_args_repr(cls):
    """The repr is what was passed (max_model_len=None: the model's, resolved later); the engine's
    own config line says what it runs with, as over a pasted command."""
    lines = [
        f"engine args: {cls}(model='m', max_model_len=None, gpu_memory_utilization=0.9, max_num_seqs=256, )",
        "INFO 11-18 01:46:40 llm_engine.py:237] Initializing an LLM engine (v0.6.3) with config: model='m', "
        "max_seq_len=8192, tensor_parallel_size=1, max_num_seqs=128, enforce_eager=False,",
    ]
    config = _config(lines)
    assert (config["max_model_len"], config["max_num_seqs"], config["gpu_memory_utilization"]) == (8192, 128, 0.9)


def test_a_class_named_like_engine_args_is_not_it():
    assert "max_num_seqs" not in _config(["MyEngineArgs(max_num_seqs=3, gpu_memory_utilization=0.5, )"])
    assert "max_num_seqs" not in _config(["see EngineArgs(...) for max_num_seqs=3, "])
