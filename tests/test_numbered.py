"""Unit tests for :mod:`vllm_doctor.numbered`: grep and ``cat -n`` prefixes. The whole-corpus
property is ``tests/test_formats.py::test_a_grepped_or_numbered_paste_gets_the_bare_class``."""

import pytest

from vllm_doctor.numbered import MIN_CONSECUTIVE, MIN_LINES, MIN_SHARE, NumberedLearner, strip


def learned(lines):
    n = NumberedLearner()
    for line in lines:
        n.observe(line)
    return n


def test_grep_n_with_context_and_separators():
    n = learned(["120-INFO a", "121:ERROR b", "122-  File x", "--", "300:ERROR c", "301-d"])
    assert (n.kind, n.file) == ("grep-n", None)
    assert [strip(n, s) for s in ("121:ERROR b", "122-  File x", "--")] == ["ERROR b", "  File x", ""]


def test_grep_over_a_named_file_keeps_other_text():
    n = learned([f"/var/log/vllm.log:{i}:INFO x" for i in range(10, 14)])
    assert (n.kind, n.file) == ("grep-n", "/var/log/vllm.log")
    assert strip(n, "/var/log/vllm.log:14:ERROR y") == "ERROR y"
    assert strip(n, "other.log:15:ERROR y") == "other.log:15:ERROR y"  # another file: left as it is


def test_cat_n():
    n = learned(["     1\tINFO a", "     2\tINFO b", "     3\t  File x"])
    assert n.kind == "cat-n" and strip(n, "     3\t  File x") == "  File x"


@pytest.mark.parametrize(
    "lines",
    [
        # time stamps: a number and a dash on every line, never counting up by one
        ["2026-11-30T03:08:01Z INFO a", "2026-11-30T03:08:02Z INFO b", "2026-11-30T03:08:03Z INFO c"],
        ["12:00:01 INFO a", "12:00:02 INFO b", "12:00:03 INFO c"],
        ["INFO 05-02 10:00:01 [core.py:1] a", "INFO 05-02 10:00:02 [core.py:1] b", "x", "y"],
        ["1:a", "2:b"],  # too few lines to decide
    ],
)
def test_a_log_of_its_own_numbers_is_left_alone(lines):
    assert learned(lines).kind is None


def test_the_thresholds():
    assert (MIN_SHARE, MIN_CONSECUTIVE, MIN_LINES) == (0.8, 0.5, 3)
    # numbers on too few lines (under MIN_SHARE)
    assert learned(["1:a", "2:b", "3:c", "x", "y"]).kind is None
    # numbers that do not count up (under MIN_CONSECUTIVE)
    assert learned(["5:a", "9:b", "20:c", "40:d"]).kind is None


@pytest.mark.parametrize(
    "stamp",
    [
        "2025-10-15T00:04:43.159326486Z ",  # docker/kubectl --timestamps (v06)
        "2025-10-15 00:04:43,159 ",  # an application logger's
        "10-14 17:04:48 ",
        "1760486683.159 ",  # epoch seconds
    ],
)
def test_grep_h_over_lines_that_start_with_a_date_is_grep_file(stamp):
    learner = NumberedLearner()
    for i in range(8):
        learner.observe(f"vllm.log:{stamp}(APIServer pid=1) INFO line {i}")
    assert (learner.kind, learner.file) == ("grep-file", "vllm.log")
    assert strip(learner, f"vllm.log:{stamp}x") == f"{stamp}x"
