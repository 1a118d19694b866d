"""Environment variables the log shows set: read where a line sets one, never where it only
mentions one, and never asked for again by a remedy (catalog/environment.py, plan.env_set)."""

import pytest
import regex
from conftest import fixture_path, load_manifest
from test_tracker import track

from vllm_doctor import diagnose
from vllm_doctor.catalog import Catalog
from vllm_doctor.catalog.environment import PREFIXES
from vllm_doctor.envelopes import unwrap
from vllm_doctor.rules.plan import env_matches

# (line, what it sets): every form an operator's log carries, and the look-alikes that set nothing.
SETS = [
    ("export NCCL_DEBUG=INFO", {"NCCL_DEBUG": "INFO"}),
    ("export NCCL_P2P_DISABLE=1 #Absolutely required !!!!!", {"NCCL_P2P_DISABLE": "1"}),
    ("export NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1", {"NCCL_IB_DISABLE": "1", "NCCL_P2P_DISABLE": "1"}),
    (
        'export PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True"',
        {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"},
    ),
    (
        "VLLM_LOGGING_LEVEL=DEBUG CUDA_VISIBLE_DEVICES=1,2 vllm serve Qwen/Qwen3-8B -tp 2",
        {"VLLM_LOGGING_LEVEL": "DEBUG", "CUDA_VISIBLE_DEVICES": "1,2"},
    ),
    ("$ CUDA_LAUNCH_BLOCKING=1 python -m vllm.entrypoints.openai.api_server --model m", {"CUDA_LAUNCH_BLOCKING": "1"}),
    (
        "docker run --gpus all -e NCCL_DEBUG=INFO --env VLLM_USE_V1=0 vllm/vllm-openai:v0.8.5 --model m",
        {"NCCL_DEBUG": "INFO", "VLLM_USE_V1": "0"},
    ),
    ("ENV VLLM_WORKER_MULTIPROC_METHOD=spawn", {"VLLM_WORKER_MULTIPROC_METHOD": "spawn"}),
    ("      - NCCL_SOCKET_IFNAME=eth0", {"NCCL_SOCKET_IFNAME": "eth0"}),
    ('      NCCL_DEBUG: "INFO"', {"NCCL_DEBUG": "INFO"}),
    ("VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}),
    ('os.environ["VLLM_USE_V1"] = "0"', {"VLLM_USE_V1": "0"}),
    (
        "(RayWorkerWrapper pid=639) host1:639:639 [5] NCCL INFO NCCL_CUMEM_ENABLE set by environment to 0.",
        {"NCCL_CUMEM_ENABLE": "0", "NCCL_DEBUG": "INFO"},
    ),
    ("host1:2949601:2949642 [0] NCCL INFO comm 0x55fb6f3ce680 rank 0 nranks 4 - Init COMPLETE", {"NCCL_DEBUG": "INFO"}),
    # breakit6: other variables on the line, quoted list entries, systemd, Ray's runtime_env
    ("HF_TOKEN=abc NCCL_P2P_DISABLE=1 vllm serve m", {"NCCL_P2P_DISABLE": "1"}),
    ("export HF_TOKEN=x NCCL_P2P_DISABLE=1", {"NCCL_P2P_DISABLE": "1"}),
    ("OMP_NUM_THREADS=8 NCCL_P2P_DISABLE=1 python -m vllm.entrypoints.openai.api_server", {"NCCL_P2P_DISABLE": "1"}),
    ("sudo NCCL_P2P_DISABLE=1 vllm serve m", {"NCCL_P2P_DISABLE": "1"}),
    ("NCCL_P2P_DISABLE=1 ./run.sh", {"NCCL_P2P_DISABLE": "1"}),
    ("cd /srv && export NCCL_IB_DISABLE=1", {"NCCL_IB_DISABLE": "1"}),
    ('      - "NCCL_P2P_DISABLE=1"', {"NCCL_P2P_DISABLE": "1"}),
    ("Environment=NCCL_P2P_DISABLE=1", {"NCCL_P2P_DISABLE": "1"}),
    ('  NCCL_DEBUG: "INFO"  # while debugging', {"NCCL_DEBUG": "INFO"}),
    ('ray.init(runtime_env={"env_vars": {"CUDA_LAUNCH_BLOCKING": "1"}})', {"CUDA_LAUNCH_BLOCKING": "1"}),
    ("export VLLM_API_KEY=alpha\\ bravo", {"VLLM_API_KEY": "alpha bravo"}),
    ("host1:7:7 [0] NCCL INFO NCCL version 2.21.5+cuda12.4", {"NCCL_DEBUG": "INFO"}),
    # mentions, not settings: comments, prose, removals
    ("# export NCCL_P2P_DISABLE=1", {}),
    ('# os.environ["NCCL_P2P_DISABLE"] = "1"', {}),
    ("Has anyone tried export NCCL_P2P_DISABLE=1 here?", {}),
    ("I grepped for NCCL INFO lines but there are none.", {}),
    ("unset NCCL_P2P_DISABLE", {}),
    ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.", {}),
    (
        "torch.OutOfMemoryError: CUDA out of memory. If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
        {},
    ),
    ("For debugging consider passing CUDA_LAUNCH_BLOCKING=1", {}),
    ("Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.", {}),
    ("HOME=/root vllm serve m", {}),  # not a family a remedy sets
]


def sets(line):
    cat = Catalog()
    found = {}
    for rec in unwrap("t.log", 1, line):
        for ev in cat.recognise(rec):
            if ev.kind == "env":
                found.update(ev.data["env"])
    return found


@pytest.mark.parametrize("line,expected", SETS, ids=[s[0][:50] for s in SETS])
def test_each_form_sets_what_a_shell_would_and_a_mention_sets_nothing(line, expected):
    assert sets(line) == expected


def test_the_last_setting_wins_and_nccl_info_lines_never_replace_a_set_level():
    t = track(
        [
            "export NCCL_DEBUG=TRACE",
            "export PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128",
            "host1:1:1 [0] NCCL INFO Bootstrap : Using eth0:192.0.2.1<0>",
            "export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
            "INFO 08-20 10:00:00 [api_server.py:1] vLLM API server version 0.10.1",
        ]
    )
    run = t.runs[0]
    assert run.env == {"NCCL_DEBUG": "TRACE", "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert run.env_lines["NCCL_DEBUG"].lineno == 1 and run.env_lines["PYTORCH_CUDA_ALLOC_CONF"].lineno == 4


def test_unset_takes_a_name_out_and_a_million_names_are_bounded():
    t = track(["export NCCL_P2P_DISABLE=1 NCCL_IB_DISABLE=1", "unset NCCL_P2P_DISABLE", "export -n NCCL_IB_DISABLE"])
    assert t.runs[0].env == {}
    from vllm_doctor.tracker import MAX_ENV

    t = track([f"export NCCL_X{i}=1" for i in range(MAX_ENV * 3)])
    assert len(t.runs[0].env) == MAX_ENV and len(t.runs[0].env_lines) == MAX_ENV


_VERSION = "INFO 07-14 23:00:03 [api_server.py:1395] vLLM API server version 0.9.2"
_NCCL_ERROR = "ERROR 07-14 23:00:09 [core.py:1] RuntimeError: NCCL error: unhandled system error"


def test_a_setting_after_the_failure_is_the_next_runs_not_the_failed_ones():
    # breakit6 item 2: exported after the error, before the restart
    t = track([_VERSION, _NCCL_ERROR, "export NCCL_P2P_DISABLE=1", _VERSION, _NCCL_ERROR])
    assert len(t.runs) == 2
    assert t.runs[0].env == {} and t.runs[1].env == {"NCCL_P2P_DISABLE": "1"}
    # and after the failure with no restart: it set nothing that ran
    t = track([_VERSION, _NCCL_ERROR, "Then I did:", "export NCCL_DEBUG=INFO"])
    assert [r.env for r in t.runs] == [{}]


def test_an_export_after_an_error_line_is_not_glued_into_it(tmp_path):
    log = tmp_path / "glue.log"
    log.write_text(f"{_VERSION}\n{_NCCL_ERROR}\nexport NCCL_P2P_DISABLE=1 NCCL_IB_DISABLE=1\n")
    (f,) = diagnose(str(log)).findings
    assert "export" not in f.title and f.title.endswith("unhandled system error")


def test_paths_already_off_are_said_under_does_not_help(tmp_path):
    log = tmp_path / "off.log"
    log.write_text(f"export NCCL_P2P_DISABLE=1 NCCL_IB_DISABLE=1\n{_VERSION}\n{_NCCL_ERROR}\n")
    (f,) = diagnose(str(log)).findings
    assert not any("NCCL_P2P_DISABLE=1" in r.action for r in f.remedies)
    assert any(
        d.startswith("Turning off the GPU-to-GPU paths: already off (NCCL_P2P_DISABLE=1") for d in f.does_not_help
    )


def test_an_env_line_is_no_vllm_output():
    t = track(["export NCCL_DEBUG=INFO", "export VLLM_USE_V1=1"])
    assert t.recognised == 0 and not t.vllm_seen


@pytest.mark.parametrize(
    "name,wanted,value,same",
    [
        ("NCCL_DEBUG", "INFO", "info", True),
        ("NCCL_DEBUG", "INFO", "TRACE", True),
        ("NCCL_DEBUG", "INFO", "WARN", False),
        ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", "max_split_size_mb:64,expandable_segments:True", True),
        ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True", "expandable_segments:False", False),
        ("CUDA_LAUNCH_BLOCKING", "1", "true", True),
        ("CUDA_LAUNCH_BLOCKING", "1", "0", False),
        ("VLLM_DEEP_GEMM_WARMUP", "skip", "skip", True),
        ("VLLM_ROCM_USE_AITER", "0", "false", True),
        ("VLLM_ROCM_USE_AITER", "0", "True", False),
        ("VLLM_SKIP_WARMUP", "true", "1", False),  # vllm-gaudi reads it as == "true"
        ("PYTORCH_ALLOC_CONF", "expandable_segments:True", "expandable_segments:True", True),
    ],
)
def test_a_value_in_force_does_what_the_advice_asks(name, wanted, value, same):
    assert env_matches(name, wanted, value) is same


# -- the family, over the corpus: set what a remedy advises, and it is not advised again ------
_ADVICE = regex.compile(r"(?<![\w=])(?P<name>(?:" + "|".join(PREFIXES) + r")[A-Z0-9_]+)=(?P<value>[\w:.-]*\w)")
#: Words that say the remedy knows the setting is in force (plan.env_set's descriptions).
_KNOWS = ("set on line", "INFO lines show", "set in the log", "already")


def _advised(verdict):
    """(name, value) pairs run 1's remedies ask to set (an "Unset ..." asks the opposite)."""
    out = set()
    for f in verdict.findings:
        if f.run != 1:
            continue
        for r in f.remedies:
            for m in _ADVICE.finditer(r.action):
                if not r.action.startswith("Unset"):
                    out.add((m["name"], m["value"]))
    return out


ADVISED = {}
for _case in load_manifest():
    _pairs = _advised(diagnose(str(fixture_path(_case["file"]))))
    if _pairs:
        ADVISED[_case["file"]] = sorted(_pairs)


def test_the_corpus_has_env_advice_to_check():
    # the family below must have cases: each of these remedies' variables is advised somewhere
    names = {n for pairs in ADVISED.values() for n, _ in pairs}
    assert len(ADVISED) >= 20 and {"NCCL_DEBUG", "CUDA_LAUNCH_BLOCKING", "PYTORCH_CUDA_ALLOC_CONF"} <= names


@pytest.mark.parametrize("name", sorted(ADVISED))
def test_a_remedy_never_asks_for_an_environment_the_log_shows_set(tmp_path, name):
    pairs = ADVISED[name]
    log = tmp_path / name
    exports = "".join(f"export {n}={v}\n" for n, v in pairs)
    log.write_text(exports + fixture_path(name).read_text(encoding="utf-8", errors="replace"), encoding="utf-8")
    verdict = diagnose(str(log))
    for f in verdict.findings:
        if f.run != 1:
            continue
        for r in f.remedies:
            text = f"{r.action} {r.why or ''}"
            for n, v in pairs:
                if f"{n}={v}" in r.action and not r.action.startswith("Unset"):
                    assert any(k in text for k in _KNOWS), f"{f.code} asks again for {n}={v}: {r.action}"
