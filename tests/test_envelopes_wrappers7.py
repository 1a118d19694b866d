"""wrappers7: Ray Serve's own log format (its replica, controller and proxy file loggers and,
under the actor prefix, their stderr), the engine arguments a framework prints as a dataclass
repr, vLLM's record prefix as proof of vLLM output, and a client's transcript of a rejected
request."""

import pytest
from conftest import fixture_path

from vllm_doctor import diagnose
from vllm_doctor.envelopes import unwrap
from vllm_doctor.pipeline import UNJUDGED, UNJUDGED_TITLE

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
        "INFO 2024-11-18 01:46:40,000 default_VLLMDeployment ujj4diu5 llm_engine.py:237 - " + bare[0].split("] ", 1)[1],
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


# -- what counts as vLLM output ---------------------------------------------------------------

A05 = "a05-2023-wsl-single-warning-pin-memory-false-cache-engine-healthy.log"


def _both(text):
    """(plain path, pre-filtered path) verdicts of ``text``, as comparable dicts."""
    import io

    from conftest import comparable

    from vllm_doctor.pipeline import diagnose_input, diagnose_source
    from vllm_doctor.sources import Source, read_lines

    data = text.encode()
    plain = comparable(diagnose_source("x", read_lines(Source("x", io.BytesIO(data)))))
    return plain, comparable(diagnose_input(Source("x", io.BytesIO(data))))


def test_a05_the_wsl_warning_is_vllm_output_and_never_alarms():
    v = diagnose(fixture_path(A05))
    assert v.primary_class == "healthy" and v.sources[0].vllm_output
    assert not v.findings or all(f.severity in ("info", "ok") for f in v.findings)


#: Records in vLLM's own logger format whose messages no catalog pattern knows.
UNCATALOGUED = [
    "WARNING 09-18 10:59:09 cache_engine.py:96] Something the catalog does not know.",
    "INFO 01-15 06:46:16 [core.py:12] Another message nobody catalogued",
    "(EngineCore_DP0 pid=77) DEBUG 01-15 06:46:16 [core.py:12] a debug line",
    "2024-05-01T10:00:00.000000001Z INFO 05-01 10:00:00 [serving.py:9] under a docker time stamp",
]


@pytest.mark.parametrize("record", UNCATALOGUED)
def test_a_record_in_vllms_format_is_vllm_output_on_both_paths(record):
    text = f"Has anyone seen this?\n{record}\nThanks\n"
    plain, fast = _both(text)
    assert plain == fast
    # vLLM's output, so never "nothing recognisable as vLLM output"; but nothing in it is known,
    # so nothing is judged: unknown, never healthy
    assert plain["primary_class"] == "unknown" and plain["sources"][0]["vllm_output"]
    assert plain["title"] == UNJUDGED_TITLE and UNJUDGED in plain["sources"][0]["notes"]


@pytest.mark.parametrize(
    "line",
    [
        "see core.py:12] in the source",  # a file:line] without vLLM's level and time
        "INFO: the server is fine [x]",
        "WARNING 2024-09-18 10:59:09 cache_engine.py:96] a year: not vLLM's time",
    ],
)
def test_prose_that_only_resembles_the_prefix_is_no_vllm_output(line):
    plain, fast = _both(f"words\n{line}\n")
    assert plain == fast and plain["primary_class"] == "unknown" and not plain["sources"][0]["vllm_output"]


def test_a_document_quoting_one_such_record_stays_no_log():
    prose = [f"Paragraph {i} of a long page about serving models, with nothing of vLLM's in it." for i in range(120)]
    text = "\n".join(prose[:60] + [UNCATALOGUED[0]] + prose[60:]) + "\n"
    plain, fast = _both(text)
    assert plain == fast
    assert plain["primary_class"] == "unknown" and not plain["sources"][0]["vllm_output"]


def test_a_long_log_of_such_records_is_vllm_output():
    lines = [
        f"INFO 01-15 06:{i // 60:02d}:{i % 60:02d} [core.py:12] step {i} of something uncatalogued" for i in range(150)
    ]
    plain, fast = _both("\n".join(lines) + "\n")
    assert plain == fast and plain["sources"][0]["vllm_output"] and plain["primary_class"] == "unknown"


def test_a_known_message_beside_them_is_judged_as_ever():
    lines = [UNCATALOGUED[0], "INFO 01-15 06:46:16 [gpu_executor.py:122] # GPU blocks: 4499, # CPU blocks: 2048"]
    plain, fast = _both("\n".join(lines) + "\n")
    assert plain == fast and plain["primary_class"] == "healthy" and UNJUDGED not in plain["sources"][0]["notes"]


# -- a client's transcript of a request rejected as too long ----------------------------------

from vllm_doctor.catalog.requests import transcript_line  # noqa: E402

CURL = [
    "curl -v -X POST -H 'Content-Type: application/json' http://192.0.2.43:8008/v1/chat/completions -d "
    '\'{"model": "m", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 32769}\'',
    "*   Trying 192.0.2.43:8008...",
    "* Connected to 192.0.2.43 (192.0.2.43) port 8008 (#0)",
    "> POST /v1/chat/completions HTTP/1.1",
    "> Host: 192.0.2.43:8008",
    ">",
    "< HTTP/1.1 400 Bad Request",
    "< server: envoy",
    "< content-type: application/json",
    "<",
    "* Connection #0 to host 192.0.2.43 left intact",
    '{"msg":"Token indices sequence length is longer than the specified maximum sequence length for this model!"}',
]
HTTPIE = [
    "$ http POST :8000/v1/completions model=m prompt=hi max_tokens:=9000",
    "HTTP/1.1 400 Bad Request",
    "content-type: application/json",
    "",
    "{",
    '    "msg": "Token indices sequence length is longer than the specified maximum sequence length for this model"',
    "}",
]
REQUESTS_REPR = [
    ">>> r = requests.post(url, json={'model': 'm', 'prompt': 'hi', 'max_tokens': 5000})",
    ">>> r",
    "<Response [400]>",
    ">>> r.text",
    '\'{"object":"error","message":"This model\\\'s maximum context length is 4096 tokens."}\'',
]


def _primary(lines):
    plain, fast = _both("\n".join(lines) + "\n")
    assert plain == fast  # the pre-filtered and plain paths read a transcript alike
    return plain


@pytest.mark.parametrize(
    "lines,max_tokens",
    [(CURL, 32769), (HTTPIE, 9000), (REQUESTS_REPR, 5000)],
    ids=["curl -v", "httpie", "requests repr"],
)
def test_a_clients_rejected_request_is_request_too_long_with_low_confidence(lines, max_tokens):
    v = _primary(lines)
    assert v["primary_class"] == "request_too_long"
    (f,) = [f for f in v["findings"] if f["class"] == "request_too_long"]
    assert f["confidence"] == "low" and f["facts"]["max_tokens"] == max_tokens
    assert "seen from the client" in f["title"]


def test_the_tokenizer_warning_alone_stays_benign():
    warning = (
        "Token indices sequence length is longer than the specified maximum sequence length for this model "
        "(40000 > 32768). Running this sequence through the model will result in indexing errors"
    )
    v = _primary(["INFO 01-15 06:46:16 [core.py:12] starting", warning])
    assert v["primary_class"] != "request_too_long"
    v = _primary(CURL[:6] + [warning])  # a transcript without a 4xx status
    assert v["primary_class"] != "request_too_long"


def test_a_status_line_outside_a_transcript_is_prose():
    v = _primary(["The server said", "HTTP/1.1 400 Bad Request", "and then", CURL[-1]])
    assert v["primary_class"] != "request_too_long"


# Literal gaps, so that moving thresholds.CLIENT_BODY_LINES (40) by half either way fails here:
# a body 30 lines after its status line is its body, one 50 lines after is not.
@pytest.mark.parametrize("gap,found", [(30, True), (40, True), (41, False), (50, False)])
def test_the_body_belongs_to_the_status_line_only_close_after_it(gap, found):
    filler = [f"< x-header-{i}: v" for i in range(gap - 1)]
    lines = CURL[:7] + filler + [CURL[-1]]  # the body `gap` lines after the status line
    assert lines.index(CURL[-1]) - lines.index(CURL[6]) == gap
    assert (_primary(lines)["primary_class"] == "request_too_long") is found


@pytest.mark.parametrize(
    "line,want",
    [
        ("* Connected to 192.0.2.43 (192.0.2.43) port 8008 (#0)", True),
        ("< HTTP/1.1 400 Bad Request", True),
        ("> POST /v1/chat/completions HTTP/1.1", True),
        ("<Response [400]>", True),
        ("$ http POST :8000/v1/completions model=m max_tokens:=9000", True),
        ("https --verify=no POST https://gw.example/v1/completions model=m", True),
        ("http is the protocol", False),
        ('INFO:     127.0.0.1:50000 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request', False),
        ("HTTP/1.1 400 Bad Request", False),  # httpie's is read once curl's or another marker is there
    ],
)
def test_what_marks_a_client_transcript(line, want):
    assert transcript_line(line) is want
