"""Messages that say a process waits on another that makes no progress: engine stalls.

Each gives a ``stall`` event whose ``data`` holds ``signal`` (which message; the tracker
keeps one count per signal) and the values the message prints. ``fatal`` is True where the
message ends the engine (a timeout raised, a process taken down), ``repeats`` where the
message is printed again for as long as the wait lasts (the tracker counts those waits until
something shows progress).

Sources, every wording by release (read in the cached source of vLLM 0.5.5 ... 0.33.0):

* ``vllm/distributed/device_communicators/shm_broadcast.py`` ``MessageQueue.acquire_write`` /
  ``acquire_read``, printed every ``VLLM_RINGBUFFER_WARNING_INTERVAL`` seconds (default 60)
  of one wait for the other side of the shared-memory ring buffer:

  - 0.5.5 - 0.6.4 (WARNING), 0.6.6 - 0.7.3 (DEBUG): ``No available block found in %s
    second.``;
  - 0.8 - 0.10.2 (DEBUG): ``No available shared memory broadcast block found in %s second.``
    (0.8.5's writer drops the space: ``...foundin 60 second.``);
  - 0.11.0 (INFO): ``No available shared memory broadcast block found in %s seconds. This
    typically happens when some processes are hanging or doing some time-consuming work (e.g.
    compilation).``;
  - 0.11.2 - 0.33.0 (INFO, ``long_wait_time_msg`` then ``LONG_WAIT_TIME_LOG_MSG``): the same,
    ending ``(e.g. compilation, weight/kv cache quantization).``

  Up to 0.10.2 the readers warned on every wait, so a TP worker waiting for its next step on
  an *idle* server printed it too (``idle_prints``: not by itself a sign of a stall). From
  0.11 the workers' wait for work is ``indefinite`` (no warning): what warns is a process
  waiting for an answer, the engine core for its workers above all;
* ``vllm/v1/executor/multiproc_executor.py`` ``collective_rpc`` (0.6.6+): ``TimeoutError: RPC
  call to %s timed out.`` (``execute_model`` waits ``VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS``,
  default 300);
* ``vllm/engine/async_llm_engine.py`` ``run_engine_loop`` (V0, 0.5.5 - 0.10.2): ``Engine
  iteration timed out. This should never happen!`` (one step waited ``ENGINE_ITERATION_TIMEOUT_S``,
  default 60);
* ``vllm/distributed/utils.py`` ``StatelessProcessGroup.barrier``: ``Barrier timed out after
  %.2f seconds`` / ``Barrier departure timed out after %.2f seconds`` (0.11+); 0.9.2 - 0.10.2
  raise ``RuntimeError("Barrier timed out after %f seconds", timeout)``, printed as the tuple
  ``('Barrier timed out after %f seconds', 600.0)`` (departure: ``... after %f s``);
* ``vllm/utils/watch_dog.py`` (0.33+, ``--watchdog-config`` with a ``dump_dir``):
  ``[Watchdog]Dumped stack to %s due to feed timeout``;
* PyTorch ``ProcessGroupNCCL.cpp`` (and the HCCL / XCCL process groups built on it), in the
  log of any vLLM worker that uses ``torch.distributed``: ``[Rank N] Watchdog caught collective
  operation timeout: WorkNCCL(SeqNum=S, OpType=OP, ..., Timeout(ms)=T) ran for M milliseconds
  before timing out.`` and ``ProcessGroupNCCL's watchdog got stuck for N seconds without making
  progress in monitoring enqueued collectives.``;
* Ray compiled graphs (the Ray executor sets ``RAY_CGRAPH_get_timeout`` to 300 s,
  ``vllm/v1/executor/ray_executor.py``): ``ray.exceptions.RayChannelTimeoutError: System error:
  ... Timed out waiting for object available to read`` / ``... increase RAY_CGRAPH_get_timeout
  which is currently N seconds. Otherwise, this may indicate that the execution is hanging.``

* Ray Serve's controller (``ray/serve/_private/deployment_state.py``
  ``ActorReplicaWrapper.check_health``, Ray 2.x; ``_replica_tag`` before Ray 2.10, then
  ``_replica_id``, printed as ``Replica(id='...', deployment='...', app='...')``): ``Didn't
  receive health check response for replica %s after %ss, marking it unhealthy.`` The replica
  (a Ray Serve LLM deployment wraps vLLM's engine) did not answer its periodic health check
  within the deployment's ``health_check_timeout_s``; Serve then restarts it. Not fatal to the
  log's engine by itself and not vLLM's message: a replica too busy to answer (a prefill burst
  holding the event loop) or hung (``health_check_missed``, rules/engine_stall.py).

* ``vllm/v1/engine/core.py`` ``EngineCore._process_input_queue`` (V1 0.8.4 only, DEBUG):
  ``EngineCore loop active - local unfinished: %s, finished: %s.``, printed when the engine's
  loop wakes from waiting for work, with whether its scheduler holds unfinished requests
  (0.8.5 prints only ``EngineCore loop active.``, read in 0.8.5.post1 - 0.33.0: no values,
  not read). ``local_unfinished`` True followed by stats at 0 running, 0 waiting and 0
  tokens/s is work the engine believes it has and does not schedule (any stats line with work
  settles it; ``EngineCore waiting for work.`` is not read: its literal would overflow the
  pre-filter's prose budget).

The reporter's words, not vLLM's (``marker`` events, on prose lines only: no record prefix,
no level, no process, rank or file): a paste of a bug report, a chat or a runbook often says
what the excerpt does not show. They never choose a class by themselves; they only keep a
log that shows no failure from being called healthy (rules/engine_stall.py, rules/unknown.py):

* ``reported_hang``: ``stuck`` (the word the pre-filter's budget lets through: ``hangs`` and
  ``stalled`` alone are not read yet; verl issue 12's "I find it stuck during
  vllm rollout ... Have you ever run into this hang issue?", fixtures/logs w04);
* ``reported_failure``: ``error(s)``, ``errored``, ``OOM`` and its inflections (``OOMs``,
  ``OOMed``, ``OOM'd``, ``OOMing``), ``crash``/``fail`` and theirs (``crashes``, ``crashed``,
  ``fails``, ``failing``) in a line with a person in it (``I``, ``we``, ``my``, ``our``), or
  with the verb right after the subject a person names the server by (``it OOMs``, ``vLLM
  crashed``, ``the server keeps crashing``; fixtures/logs a11): a program's own message has none; vllm issue 9630's "With max-num-seqs I see a different error (below)", the
  error cut from the excerpt, fixtures/logs v13).

Not in this family: V0's client-side ``RPCServer didn't reply within N ms`` / ``MQLLMEngine
didn't reply within N ms`` (``vllm/engine/multiprocessing/client.py``): the front end cannot
reach the engine process, which has mostly died first (a consequence, not a hang).
"""

from __future__ import annotations

from typing import Any, Dict, Optional

import regex

from .pattern import NO_CUT, Pattern


def _shm(old: bool):
    """``old``: the 0.5.5-0.7.3 wording. Up to 0.10.2 the message says ``second``, from 0.11
    ``seconds``: the singular marks a release whose idle workers print it too."""

    def build(m, rec) -> Dict[str, Any]:
        text = m.string[m.end() : m.end() + 200]
        data: Dict[str, Any] = {
            "signal": "shm_wait",
            "interval_s": int(m["interval"]),
            "repeats": True,
            "idle_prints": old or not m["plural"],
        }
        if "compilation" in text:
            data["names_compilation"] = True
        if "quantization" in text:
            data["names_quantization"] = True
        return data

    return build


def _signal(name: str, fatal: bool, ints=(), texts=()):
    def build(m, rec) -> Optional[Dict[str, Any]]:
        data: Dict[str, Any] = {"signal": name, "fatal": fatal}
        gd = m.groupdict()
        for key in ints:
            if gd.get(key) is not None:
                data[key] = int(float(gd[key]))
        for key in texts:
            if gd.get(key):
                data[key] = gd[key]
        return data

    return build


def _health_check(m, rec) -> Dict[str, Any]:
    """Ray Serve's controller marked a replica unhealthy: the timeout it waited (seconds)."""
    return {"signal": "health_check_missed", "fatal": False, "timeout_s": float(m["timeout_s"])}


def _loop_active(m, rec) -> Dict[str, Any]:
    data: Dict[str, Any] = {"signal": "loop_unfinished", "fatal": False, "local_unfinished": m["local"] == "True"}
    if m["finished"]:
        data["finished"] = m["finished"] == "True"
    return data


#: vLLM's own wordings that hold a reporter's word (the shm_broadcast warning's "some processes
#: are hanging", PyTorch's "watchdog got stuck"): never the reporter's, with or without a prefix.
_VLLM_WORDS = ("processes are hanging", "watchdog got stuck", "No available shared memory broadcast block")


#: The reporter's words of each marker (case-insensitive, whole words).
REPORTED_WORDS = {
    "reported_hang": r"\bstuck\b",
    # the nouns and every inflection of the verbs: "an error", "errored", "it OOMs", "OOMed",
    # "OOM'd", "OOMing", "crashes", "crashed", "fails", "failing"
    "reported_failure": r"\b(?:errors?|errored|OOM(?:s|ed|'d|ing)?|[Cc]rash(?:es|ed|ing)?|[Ff]ail(?:s|ed|ing))(?!\w)",
}


def reported_excerpt(name: str, text: str, width: int = 90) -> str:
    """The words around the first of ``name``'s words in ``text`` (a reporter's line), white
    space collapsed, at most about ``width`` characters, ``...`` where cut."""
    text = " ".join(text.split())
    m = regex.search(REPORTED_WORDS[name], text)
    if m is None or len(text) <= width:
        return text[:width]
    start = max(0, min(m.start() - width // 2, len(text) - width))
    out = text[start : start + width]
    return ("..." if start else "") + out + ("..." if start + width < len(text) else "")


#: A program's line, not a person's: an exception line (``RuntimeError: ...``,
#: ``torch.OutOfMemoryError: ...``), a traceback's header or frame, a Ray or raylet prefix.
_PROGRAM = regex.compile(r"^\W{0,4}(?:[\w.]{0,80}(?:Error|Exception|Warning)\b|Traceback|File \"|\(raylet\)|\(\d+\) )")
#: Words of a person telling what happened (the reporter's failure words need one in their line:
#: "I see a different error", "we got OOM", "my server crashed"; a program's message has none).
_FIRST_PERSON = regex.compile(r"\b(?:I|I'm|I've|[Ww]e|[Mm]y|[Oo]ur)\b")
#: Or a subject a person names the server by, right before a failure verb, with at most one
#: helper word between ("it OOMs:", "vLLM crashed", "the server keeps crashing", "It then
#: fails"): a person's sentence even without I or we. The verb must follow its subject: a
#: program's "Engine core initialization failed" or "request failed" names no such subject.
_SUBJECT_VERB = regex.compile(
    r"(?:^|[\s(\[\"'`])(?:[Ii]t|[Tt]his|[Vv][Ll][Ll][Mm]|(?:[Tt]he|[Tt]his) (?:server|engine|model|container|pod|job|"
    r"notebook|kernel|instance|deployment|replica|service))"
    r"\s+(?:(?:still|just|then|also|always|now|sometimes|eventually|immediately|randomly|keeps|kept|is|was|"
    r"instantly|quickly)\s+)?"
    r"(?:OOM(?:s|ed|'d|ing)?|crash(?:es|ed|ing)?|fail(?:s|ed|ing)|errored|errors out)(?!\w)"
)


def _prose(name: str, first_person: bool = False):
    """A ``marker`` named ``name`` for a line that is prose: no vLLM record prefix, no level,
    process, rank or file (a stderr or traceback line has one of those, or is vLLM's own),
    not a program's line (:data:`_PROGRAM`) and, with ``first_person``, a person's
    (:data:`_FIRST_PERSON`)."""

    def build(m, rec) -> Optional[Dict[str, Any]]:
        if rec.vllm_header or rec.level or rec.proc or rec.rank is not None or rec.file:
            return None
        if any(w in rec.text for w in _VLLM_WORDS) or _PROGRAM.search(rec.text):
            return None
        if first_person and not (_FIRST_PERSON.search(rec.text) or _SUBJECT_VERB.search(rec.text)):
            return None
        return {"marker": name, "prose": True}  # not counted as a recognised vLLM record

    return build


PATTERNS = [
    Pattern(
        "shm_broadcast_wait",
        "stall",
        ("No available shared memory broadcast block",),
        # "found in" (0.8.5's reader), "foundin" (its writer); "second." up to 0.10.2, "seconds." after.
        r"No available shared memory broadcast block found ?in (?P<interval>\d{1,6}) second(?P<plural>s)?",
        "vllm/distributed/device_communicators/shm_broadcast.py MessageQueue.acquire_write / acquire_read "
        "(0.8+; 0.11+ adds 'This typically happens when some processes are hanging ...')",
        None,
        _shm(old=False),
        cut_from=r"found ?in \d{1,6} seconds?[^a-z]",  # the interval whole, and 'second' or 'seconds'
    ),
    Pattern(
        "shm_block_wait_old",
        "stall",
        ("No available block found in",),
        r"No available block found in (?P<interval>\d{1,6}) second(?P<plural>s)?",
        "vllm/distributed/device_communicators/shm_broadcast.py MessageQueue.acquire_write / acquire_read "
        "(0.5.5-0.7.3; printed by idle workers too)",
        None,
        _shm(old=True),
        cut_from=r"found in \d{1,6} seconds?[^a-z]",
    ),
    Pattern(
        "rpc_call_timed_out",
        "stall",
        ("RPC call to ",),
        r"RPC call to (?P<method>\w{1,80}) timed out",
        "vllm/v1/executor/multiproc_executor.py MultiprocExecutor.collective_rpc (0.6.6+)",
        None,
        _signal("rpc_timeout", True, texts=("method",)),
    ),
    Pattern(
        "engine_iteration_timed_out",
        "stall",
        ("Engine iteration timed out",),
        r"Engine iteration timed out",
        "vllm/engine/async_llm_engine.py AsyncLLMEngine.run_engine_loop (V0, 0.5.5-0.10.2)",
        None,
        _signal("iteration_timeout", True),
    ),
    Pattern(
        "barrier_timed_out",
        "stall",
        ("Barrier timed out after", "Barrier departure timed out after"),
        # 0.9.2-0.10.2 raise it with the timeout as a second argument: the tuple's repr is printed
        r"Barrier (?:departure )?timed out after (?:(?P<timeout_s>\d{1,9}(?:\.\d+)?) s"
        r"|%f s(?:econds)?['\"], (?P<timeout_s>\d{1,9}(?:\.\d+)?)\))",
        "vllm/distributed/utils.py StatelessProcessGroup.barrier (0.9.2+)",
        None,
        _signal("barrier_timeout", True, ints=("timeout_s",)),
    ),
    Pattern(
        "engine_loop_unfinished",
        "stall",
        ("EngineCore loop active - local unfinished: ",),
        # the first value decides; a paste cut before ", finished: ..." still says it
        r"EngineCore loop active - local unfinished: (?P<local>True|False)(?:, finished: (?P<finished>True|False))?",
        "vllm/v1/engine/core.py EngineCore._process_input_queue (V1 0.8.4, DEBUG)",
        None,
        _loop_active,
        cut_from=r"local unfinished: (?:True|False)",  # the value decides: cut before it, nothing
    ),
    Pattern(
        "stack_dump_watchdog",
        "stall",
        ("[Watchdog]Dumped stack to ",),
        r"\[Watchdog\]Dumped stack to (?P<dump_path>\S{1,400}) due to (?P<reason>[\w ]{1,40})",
        "vllm/utils/watch_dog.py WatchDog.handle_failure (0.33+, --watchdog-config dump_dir)",
        None,
        _signal("watchdog_dump", False, texts=("dump_path", "reason")),
    ),
    Pattern(
        "collective_watchdog_timeout",
        "stall",
        ("Watchdog caught collective operation timeout",),
        r"(?:\[Rank (?P<rank>\d{1,6})\] )?Watchdog caught collective operation timeout: "
        r"Work(?P<backend>[A-Z]{2,6})\(SeqNum=(?P<seq>\d{1,12}), OpType=(?P<op>\w{1,40})(?=[,)])"
        r"(?:[^)]{0,200}?Timeout\(ms\)=(?P<timeout_ms>\d{1,12})(?=\)))?"
        r"(?:\)\s*ran for (?P<ran_ms>\d{1,12}) milliseconds)?",
        "PyTorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp watchdog (HCCL/XCCL process groups alike)",
        None,
        _signal("collective_timeout", True, ints=("rank", "seq", "timeout_ms", "ran_ms"), texts=("backend", "op")),
    ),
    Pattern(
        "collective_watchdog_stuck",
        "stall",
        ("s watchdog got stuck for ",),
        r"ProcessGroup(?P<backend>[A-Z]{2,6})'s watchdog got stuck for (?P<stuck_s>\d{1,9}) seconds",
        "PyTorch torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp heartbeat monitor",
        None,
        _signal("collective_stuck", True, ints=("stuck_s",), texts=("backend",)),
    ),
    Pattern(
        "ray_channel_timeout",
        "stall",
        ("RayChannelTimeoutError", "RAY_CGRAPH_get_timeout which is currently"),
        r"RayChannelTimeoutError(?:.{0,300}?RAY_CGRAPH_get_timeout which is currently (?P<timeout_s>\d{1,9}) seconds)?"
        r"|RAY_CGRAPH_get_timeout which is currently (?P<timeout_s>\d{1,9}) seconds",
        "Ray compiled graphs (ray.exceptions.RayChannelTimeoutError); vllm/v1/executor/ray_executor.py sets "
        "RAY_CGRAPH_get_timeout",
        None,
        _signal("ray_channel_timeout", True, ints=("timeout_s",)),
    ),
    Pattern(
        "serve_health_check_missed",
        "stall",
        # "Didn't rece": a literal of its own in the gate's group of rare starts (a longer one holds
        # "ive ", which the gate would pick as a prose-start literal shared with another anchor)
        ("Didn't rece",),
        r"Didn't receive health check response for replica (?P<replica>[^\n]{1,300}?) after "
        r"(?P<timeout_s>\d{1,6}(?:\.\d{1,3})?)s,(?: marking it unhealthy)?",
        "ray/serve/_private/deployment_state.py ActorReplicaWrapper.check_health (Ray Serve's controller)",
        None,
        _health_check,
        cut_from=r"after \d{1,6}(?:\.\d{1,3})?s, ",
    ),
    Pattern(
        "reported_hang",
        "marker",
        # the pre-filter's prose-like literals are at their budget (prefilter.PROSE_GROUP x 3 groups):
        # a short literal, searched by its own tiny automaton
        ("tuc",),
        REPORTED_WORDS["reported_hang"],
        "the reporter's words around the log (bug reports, chats, runbooks), not vLLM's",
        None,
        _prose("reported_hang"),
        cut_from=NO_CUT,
    ),
    Pattern(
        "reported_failure",
        "marker",
        # literals the gate holds already (see above), and a short one for "crash"/"Crash",
        # searched by the gate's tiny automaton of short literals (the long groups are full)
        ("rror", "OOM", "fail", "ras"),
        REPORTED_WORDS["reported_failure"],
        "the reporter's words around the log (bug reports, chats, runbooks), not vLLM's",
        None,
        _prose("reported_failure", first_person=True),
        cut_from=NO_CUT,
    ),
]
