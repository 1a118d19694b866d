"""The library entry point: clear errors for what is not a log, one-line messages."""

import io
import pathlib

import pytest
from conftest import fixture_path

from vllm_doctor import diagnose
from vllm_doctor.sources import InputError

KV = fixture_path("s001-llama31-8b-3090-kv-29k.log")


@pytest.mark.parametrize("bad", [None, 42, 4.2, object(), b"/var/log/vllm.log", bytearray(b"x"), memoryview(b"x")])
def test_what_is_neither_a_path_nor_lines_is_a_type_error(bad):
    with pytest.raises(TypeError, match="path .* or an iterable of lines"):
        diagnose(bad)


def test_a_whole_log_passed_as_one_string_is_a_clear_error_not_a_verdict():
    text = KV.read_text()
    with pytest.raises(TypeError, match="line breaks.*splitlines"):
        diagnose(text)
    assert diagnose(text.splitlines()).primary_class == "kv_cache_capacity"


def test_an_iterable_of_other_things_is_a_type_error_naming_the_line():
    with pytest.raises(TypeError, match="line 2 .* int"):
        diagnose(["INFO ok", 7])


def test_lines_paths_and_file_objects_all_work():
    want = diagnose(str(KV)).primary_class
    assert want == "kv_cache_capacity"
    assert diagnose(KV).primary_class == want  # PathLike
    assert diagnose(io.BytesIO(KV.read_bytes())).primary_class == want
    with open(KV, encoding="utf-8") as fh:
        assert diagnose(fh).primary_class == want
    assert diagnose([bytearray(line) for line in KV.read_bytes().splitlines()]).primary_class == want


def test_an_unreadable_path_is_a_one_line_input_error(tmp_path):
    with pytest.raises(InputError) as info:
        diagnose(pathlib.Path(tmp_path / "no\nsuch\x1b[2J.log"))
    assert "\n" not in str(info.value) and "\x1b" not in str(info.value)
    assert "no such file" in str(info.value)
