"""``vllm-doctor`` with the chunked scan off: one process does all the work.

For comparing builds by CPU time on a loaded machine, where wall times are not speeds:
``/usr/bin/time -f "%U s" python bench/serial.py diagnose --format json FILE`` counts the
gate, the recognition and the trackers alike (the chunk workers are children of a fork
server, which GNU time does not count).
"""

import sys

import vllm_doctor.chunks

if __name__ == "__main__":
    vllm_doctor.chunks.MIN_BYTES = 1 << 62  # no file is large enough to be cut into chunks
    from vllm_doctor.cli import main

    sys.argv[0] = "vllm-doctor"
    main()
