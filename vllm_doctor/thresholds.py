"""Every judgement number of the rules, in one place, each with its reason or source.

Rules read these as ``thresholds.NAME`` at call time (never ``from ... import NAME``), so
``tools/mutation_check.py`` can move each one and prove a test notices: every constant here
is pinned by at least one case of ``tests/rules/cases`` or a corpus log, in both directions
(half and one and a half times its value).

Shares are fractions of the GPU's total memory; percentages are as vLLM prints them (0-100);
memory is GiB.
"""

from __future__ import annotations

# -- KV cache saturation and preemption (VD201 preemption_storm, VD301 kv_pressure) -----------
#: KV cache usage (%) from which an interval with requests waiting, swapped or preempted counts
#: as saturated: the scheduler preempts when it cannot allocate a block, which happens well
#: before 100 % once blocks are fragmented across sequences (vllm/v1/core/sched/scheduler.py).
SATURATED_KV_PCT = 85.0
#: Consecutive saturated stats intervals that make a storm; fewer is a passing peak (VD301).
#: V1 logs stats every 10 s (VLLM_LOG_STATS_INTERVAL), V0 every 5 s: 3 intervals is 15-30 s.
MIN_SATURATED_INTERVALS = 3
#: V0 preemption warnings (one is printed every V0_PREEMPTION_LOG_EVERY preemptions, see
#: rules/preemption_storm.py) that make a storm: twice means at least 51 preemptions.
V0_STORM_WARNINGS = 2
#: How many times the ``--swap-space`` in force a V0 engine that ran out of CPU swap blocks
#: ("Aborted due to the lack of CPU swap space") is advised: doubling the pool doubles the
#: preempted sequences it can park; one step, the KV remedies come first.
SWAP_SPACE_RAISE_FACTOR = 2.0
#: Stats intervals with a non-zero V1 ``Preemptions:`` field that make a storm.
V1_STORM_PREEMPTION_INTERVALS = 2
#: KV cache usage (%) at which the LAST interval of a log, with a queue of QUEUE_OVER_RUNNING x
#: the running batch, is a capacity signal on its own (preemption_storm.saturated_at_the_end):
#: at 95 % the scheduler cannot admit one more request's blocks, and nothing after it shows the
#: peak passed. q16 98.7 %, k030 99.0 % (two labellers and the hunt call both saturated).
FULL_KV_LAST_INTERVAL_PCT = 95.0
#: Requests waiting per running request from which that last interval's queue is demand the KV
#: cache cannot hold, not a burst being admitted: 3 x (k030: 115 waiting, 35 running; q16: 20, 2).
QUEUE_OVER_RUNNING = 3.0
#: Saturated intervals at the END of a log (the last one full, FULL_KV_LAST_INTERVAL_PCT) that
#: make a storm when an earlier interval of the run was below saturation: one alone, after
#: healthy serving, is a burst that just began (a load test starting: breakit4 item 8, where
#: the verdict flipped on thresholds at that one sample), so a second one (or a preemption)
#: must show it lasting. A log whose every stats line is saturated (q16, k030: the line the
#: reporter quoted as the symptom) has no healthy interval to say so, and one line stands.
SATURATED_END_MIN_INTERVALS = 2

#: How much a "give the KV cache more memory" remedy raises gpu_memory_utilization (about
#: 2.4 GiB of KV cache on an 80 GiB GPU; capped at MAX_ADVISED_UTILIZATION).
UTILIZATION_RAISE_STEP = 0.03
#: A storm's "fewer concurrent sequences" remedy halves what ran only from this many: with
#: fewer at once (hunt7 q16: 2 ran, 20 waited) the KV cache, not the batch, is the limit, and
#: half of it would serialise the server (fresh20 item 3).
MIN_SEQS_TO_HALVE = 8

# -- Engine stall (VD203) ---------------------------------------------------------------------
#: Consecutive stats intervals with requests waiting, none running and nothing generated that
#: make a head-of-line block. vLLM prints one such line and then drops to DEBUG while idle
#: (vllm/v1/metrics/loggers.py engine_is_idle), so one line followed by silence counts too.
BLOCKED_MIN_INTERVALS = 2
#: Consecutive intervals with requests running and nothing processed that make a wedge, where
#: the intervals keep coming (metrics scrapes; releases that log idle stats at INFO).
WEDGE_MIN_INTERVALS = 2
#: Consecutive stats intervals with requests waiting and none admitted (no prompt tokens
#: processed) while others run and decode, below SATURATED_KV_PCT, that make a queue that is
#: never admitted. V1 admits a waiting request in the next step when its input fits (chunked
#: prefill: vllm/v1/core/sched/scheduler.py schedules waiting requests every step), so a whole
#: interval with nothing admitted is already unusual; 3 intervals (30 s at V1's 10 s, 15 s at
#: V0's 5 s) rule out a burst that arrived at the end of an interval.
QUEUE_BLOCKED_MIN_INTERVALS = 3
#: Seconds of one wait with no progress (shm_broadcast warnings in a row from one process x
#: VLLM_RINGBUFFER_WARNING_INTERVAL, 60 s by default) from which the wait is a stall. The
#: warning also comes while a worker does long but real work (its own text since 0.11 names
#: compilation and weight/KV cache quantization): fixtures/logs t015 printed it twice (120 s)
#: over a 107 s CPU warm-up that then finished. Three intervals with nothing in between that
#: shows progress is past most such steps on a GPU; a cold compile of a large model can take
#: longer, so at startup the finding is of low confidence and says so, and a startup wait that
#: ends in progress is no stall at all.
STALL_MIN_WAIT_S = 180
#: Stats lines at 0 running, 0 waiting and 0 tokens/s (of any engine) after an engine said its
#: scheduler holds unfinished requests (V1 0.8.4's DEBUG ``EngineCore loop active - local
#: unfinished: True``) that make work it believes it has and never schedules (fixtures/logs
#: v26, vllm issue 16580: DP=2, one interval of each engine). One line alone can be the
#: interval in which that request was added and aborted; with data parallelism every engine
#: steps while any holds unfinished requests, so two idle lines (one of each of two engines, or
#: two of one) leave no such reading.
UNFINISHED_IDLE_MIN_INTERVALS = 2

# -- Queue backlog (VD302) --------------------------------------------------------------------
#: KV cache usage (%) below which requests waiting are held back by the batch budget
#: (max_num_seqs, max_num_batched_tokens), not by memory.
BACKLOG_MAX_KV_PCT = 70.0
#: Intervals with requests waiting at that usage that make a backlog worth a note.
BACKLOG_MIN_INTERVALS = 2

# -- Slow, not memory (VD307) ------------------------------------------------------------------
#: Generation throughput per running request (tokens/s) below which decoding is pathologically
#: slow: a GPU decodes tens of tokens per second per sequence for models that fit it.
SLOW_TPS_PER_REQUEST = 5.0
#: KV cache usage (%) below which memory is clearly not what holds decoding back.
SLOW_MAX_KV_PCT = 50.0
#: Consecutive stats intervals of such decoding that make the finding.
SLOW_MIN_INTERVALS = 3

# -- Settings worth a look (VD303-VD306) ------------------------------------------------------
#: gpu_memory_utilization at or above which no margin is left for fragmentation, transient
#: activations or a co-tenant (shared/domain.md "Common pitfalls").
HIGH_UTILIZATION = 0.95
#: The highest gpu_memory_utilization a remedy ever advises: below HIGH_UTILIZATION, so the
#: plan never advises what VD303 would flag.
MAX_ADVISED_UTILIZATION = 0.94
#: The lowest gpu_memory_utilization a "lower it" remedy advises; below it the remedy says the
#: GPU is too small for this configuration instead of printing a useless number.
MIN_ADVISED_UTILIZATION = 0.3
#: Prefix-cache hit rate (%) that shows prefix caching worked at some point ...
PREFIX_HIT_WORKED_PCT = 5.0
#: ... and the rate (%) it fell below for the note to say it collapsed.
PREFIX_HIT_COLLAPSED_PCT = 1.0
#: max_model_len from which a length is "very long" (64k: twice the common 32k default).
LONG_MAX_MODEL_LEN = 65536
#: Peak KV cache usage (%) below which a very long max_model_len was clearly not needed.
LOW_KV_USE_PCT = 20.0

# -- Failures the log does not explain (VD901) --------------------------------------------------
#: HTTP 5xx responses in one run from which requests failing is a finding on its own, even
#: with no error line (the engine may have died in another process's log).
HTTP_5XX_FINDING = 10

# -- Runtime OOM (VD200) ----------------------------------------------------------------------
#: A single failed allocation of at least this share of the GPU points at one oversized input
#: (a long prompt with prompt logprobs, a large image), not at general headroom.
OVERSIZED_ALLOCATION_SHARE = 0.04
#: ... and of at least this many GiB when the OOM happened inside model execution.
OVERSIZED_ALLOCATION_GIB = 1.0
#: Headroom (GiB) a lowered gpu_memory_utilization leaves at least, below what vLLM held.
MIN_HEADROOM_GIB = 1.0
#: A co-tenant holding at most this (GiB) is a bare CUDA context (another vLLM process, an
#: orphan: 250-500 MiB with lazy module loading), not what ran the GPU out: where the frames show
#: a request's input drove the OOM it is a note, not a remedy (q25: two processes of 248 MiB
#: beside a 1.71 GiB prompt-logprobs allocation).
CUDA_CONTEXT_MAX_GIB = 0.5
#: Reserved-but-unallocated memory (GiB) from which fragmentation is worth a remedy
#: (PyTorch's own hint in the OOM message).
FRAGMENTATION_GIB = 0.5
#: Share of the failed allocation the reserved-but-unallocated memory must reach before
#: expandable segments is the first fix of an OOM raised outside vLLM: from half of it, the
#: free memory plus the fragments would have served the request (p22: 3.49 GiB fragmented,
#: 2.63 GiB asked, 2.61 GiB free).
FRAGMENTATION_SHARE_OF_REQUEST = 0.5

# -- OOM provenance (rules/oom_provenance.py) ---------------------------------------------------
#: An OOM whose driver-side free memory is at least this many times the largest segment the
#: caching allocator could have asked for (twice the request, 20 MiB at least) is no shortage:
#: PyTorch raises only after returning its whole cache to the driver, and the driver maps pages
#: into one virtual range, so fragmentation cannot explain it. The margin covers what moves in
#: the instant between the failed cudaMalloc and cudaMemGetInfo (a co-tenant freeing memory) and
#: drivers whose own contiguity limits fail real requests with memory free: WSL2 refused a
#: 1.02 GiB request (a 2.04 GiB segment) with 5.8 GiB free, under 3 segments. p21: 20 MiB with
#: 66.43 GiB free (1700 segments) is the sleep-mode CuMemAllocator failing.
ALLOCATOR_FAILURE_FREE_RATIO = 8.0
#: GiB by which "this process has M memory in use" may fall short of what PyTorch says it
#: allocated before M is taken as unseen (NVML missed the process's memory: vLLM's
#: CuMemAllocator, a PID namespace; p21 prints 0 bytes beside 8.51 GiB allocated): both are
#: printed to two decimals, in MiB or GiB, so their rounding differs by up to 0.01 GiB.
UNSEEN_MARGIN_GIB = 0.01

#: An OOM request larger than this share of the device's total memory can never fit, whatever
#: the settings: one tensor larger than the whole GPU is a runaway (an unbounded input, an
#: attention path without flash attention: rules/impossible_allocation.py). 1.0 is the whole
#: device; u06 asked 408.29 of 79.33 GiB (5.1x), q04 256 of 15.98 GiB (16x), while the largest
#: real capacity OOM requests in the corpus stay well under the device (a KV cache allocation of
#: most of it).
IMPOSSIBLE_ALLOCATION_SHARE = 1.0

# -- Co-tenants (VD102, VD200) ----------------------------------------------------------------
#: A co-tenant holding at least this share of the GPU is worth blaming at startup.
SIGNIFICANT_FOREIGN_SHARE = 0.05
#: Memory neither free nor held by the failing process, where the OOM message lists no other
#: process (a container cannot see other PIDs; the pre-2.2 torch format lists none), counts
#: as held by others from this share of the device. Higher than a listed co-tenant's share:
#: the old format cannot tell this process's memory outside PyTorch (CUDA context, NCCL or
#: HCCL buffers: a few GiB at most) from other processes' (n06: 50.3 of 60.97 GiB on an NPU
#: whose PyTorch held 10.65).
UNLISTED_FOREIGN_SHARE = 0.25
#: A worker's name or rank proves at most this many ranks (plan.tp_at_least): beyond the
#: largest deployments (a 72-GPU NVLink rack, multi-node TP), a name such as Worker_TP9999 is
#: a damaged line, not a 10,000-GPU run whose weights "should fit".
MAX_PROVEN_RANKS = 128
#: Share of the memory left free by co-tenants that a lowered utilization takes (margin).
FREE_SHARE_TAKEN = 0.95
#: Initial and current free memory (GiB) closer than this are "unchanged" in the profiling
#: check (a false positive of the strict comparison of some versions).
UNCHANGED_FREE_GIB = 0.01

# -- KV cache capacity (VD101) ----------------------------------------------------------------
#: KV cache (GiB) a raised utilization leaves beyond covering a negative budget.
KV_FLOOR_GIB = 1.0

# -- Weights (VD100) --------------------------------------------------------------------------
#: Share of a GPU the weights may take when sizing tensor parallelism (the rest: activations,
#: KV cache, CUDA graphs).
WEIGHTS_USABLE_SHARE = 0.9
#: Overhead on the weights estimated from the parameter count (embeddings, buffers, scales).
WEIGHTS_OVERHEAD = 1.1
#: Weights per GPU below this share of the GPU clearly fit: an OOM then points at a bug.
WEIGHTS_CLEARLY_FIT_SHARE = 0.6
#: Share of each GPU a tensor-parallel split must leave for the KV cache beyond the weights
#: (a split that fits the weights but leaves no KV cache only moves the failure to VD101).
KV_FLOOR_SHARE = 0.05
#: Share of the checkpoint's shards loaded at most, while the process already holds this share
#: of the GPU (REGRESSION_HELD_SHARE), for the OOM to point at a bug rather than at the size.
REGRESSION_SHARDS_SHARE = 0.5
REGRESSION_HELD_SHARE = 0.9

# -- Warm-up OOMs (VD103, VD104) --------------------------------------------------------------
#: How much a warm-up OOM remedy lowers gpu_memory_utilization (graph pools and the sampler's
#: logits buffer come out of what the KV cache left).
WARMUP_UTILIZATION_STEP = 0.05

# -- Compare (vllm-doctor compare) -------------------------------------------------------------
#: Change (%) of a KV cache capacity (tokens, GiB, max concurrency) or of a memory consumer
#: (weights, CUDA graphs, activations) that matters; a KV capacity lost by at least this much is
#: a regression. TP ranks of one engine already differ by about 2 % (fixtures/logs r045: 25408 vs
#: 25920 tokens), so smaller moves are the profiler's own noise.
COMPARE_CAPACITY_PCT = 5.0
#: ... and at least this many GiB for a memory value to matter: 0.25 GiB is 2048 tokens of KV
#: cache for Llama-3-8B (128 KiB per token), below that a few percent of a small pool is noise.
COMPARE_MIN_GIB = 0.25
#: Change (%) of the median generation throughput that matters, and the loss per running request
#: that is a regression: the two runs seldom serve the same load, so only a large move says
#: something about the server rather than the traffic.
COMPARE_THROUGHPUT_PCT = 20.0
#: Stats intervals each run needs before its medians are compared: one line is one 5-10 s
#: interval (a warm-up moment, not a level), three are 15-30 s of serving.
COMPARE_MIN_STATS_INTERVALS = 3
#: Change (%) and absolute change (seconds) of a start-up time that matter: compile and load
#: times move with caches and disks (torch.compile took 3.88 s from its cache and 18.40 s without
#: in fixtures/logs r032 / r022), so only a large, long move is worth a line.
COMPARE_TIMING_PCT = 50.0
COMPARE_TIMING_MIN_S = 10.0

# -- Input that quotes vLLM rather than being its log (vllm_doctor/quoted.py) -----------------
#: Physical lines from which an input without any vLLM record or process prefix may be a
#: document quoting vLLM (a README, a chat, a wiki page) rather than a log: every log pasted
#: by hand without a prefix in the corpus and the hold-out has 29 lines or fewer.
QUOTED_DOC_MIN_LINES = 80
#: Share of such an input's lines vLLM's own messages must reach for it to be read as a log
#: (this project's README: 1.2%; a traceback pasted alone is well above: every frame counts).
QUOTED_DOC_MAX_SHARE = 0.05
#: Lines after an input's last failure within which that failure ends the input: a program's
#: own output (a training loop's prints, then vLLM's fatal error: breakit4 item 2) ends where
#: it failed; a page that quotes an error goes on well past it (a traceback's last frame and
#: "Aborted"-style lines fit).
QUOTED_DOC_TAIL_LINES = 10

# -- A client's transcript of a rejected request (catalog/requests.py, rules/tree.py) ----------
#: Lines after a client's 4xx status line within which a body naming a length limit is that
#: response's body (curl -v: a dozen response headers, then the body; a request's max_tokens
#: is read as far before the status line).
CLIENT_BODY_LINES = 40

# -- An allocation larger than the device (VD900, rules/impossible_allocation.py) ------------
#: In the profiling run, whose dummy batch is max_num_batched_tokens tokens, an allocation
#: grows with that count: the advised count is this share of the most for which the one
#: allocation would fit the whole device (the weights, the KV cache and the rest need room).
PROFILE_BATCH_SHARE = 0.25

# -- The launch command refused by the parser (VD900, rules/launch_rejected.py) --------------
#: How alike a refused flag and a flag of some vLLM release must be (difflib's ratio: twice the
#: matching characters over both lengths) for the tool to name it as the one meant: one or two
#: letters swapped, dropped or doubled in a flag of a dozen characters or more
#: (``--max-modle-len``, ``-language-model-only``), and not a flag that only shares a word
#: with it or a plugin's flag (``--omni``).
CLOSE_FLAG_RATIO = 0.8
#: At most this many characters longer or shorter than the flag meant: a misspelling drops,
#: doubles or swaps a few letters, or a short word (``--host-ip`` for ``--host``); a longer
#: word more or less (``--max-len`` against ``--max-log-len``, ``--max-num-tokens`` against
#: ``--max-num-queued-tokens``) is another flag, not a typo of it (breakit5 item 10).
CLOSE_FLAG_LENGTH_GAP = 3
