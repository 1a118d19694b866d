"""journald's short format writes the month as the locale's abbreviation (strftime ``%b``):
a host set to another language gives "авг 18 14:14:59 host python3[PID]: ..." (w16), which is
journald's prefix, peeled as "Aug 18" is, never a prefix to learn."""

import pytest

from vllm_doctor.envelopes import unwrap

#: glibc's abbreviated month names (localedata: LC_TIME abmon) of a few locales.
ABMON = {
    "ru_RU": "янв фев мар апр май июн июл авг сен окт ноя дек",
    "uk_UA": "січ лют бер кві тра чер лип сер вер жов лис гру",
    "de_DE": "Jan Feb Mär Apr Mai Jun Jul Aug Sep Okt Nov Dez",
    "fr_FR": "janv. févr. mars avril mai juin juil. août sept. oct. nov. déc.",
    "es_ES": "ene feb mar abr may jun jul ago sep oct nov dic",
    "it_IT": "gen feb mar apr mag giu lug ago set ott nov dic",
    "pt_BR": "jan fev mar abr mai jun jul ago set out nov dez",
    "pl_PL": "sty lut mar kwi maj cze lip sie wrz paź lis gru",
    "en_US": "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec",
}
RECORD = "(Worker_TP0 pid=28145) INFO 08-18 14:14:59 [gpu_worker.py:298] Available KV cache memory: 2.5 GiB"


@pytest.mark.parametrize(
    "locale,month", [(loc, m) for loc, months in ABMON.items() for m in months.split()], ids=lambda v: str(v)
)
def test_a_localised_journald_month_is_journald(locale, month):
    (rec,) = unwrap("t", 1, f"{month} 18 14:14:59 llm python3[28145]: {RECORD}")
    assert (rec.wrapper, rec.unit, rec.proc, rec.pid) == ("journald", "python3", "Worker_TP0", 28145)
    assert rec.text == "Available KV cache memory: 2.5 GiB"


@pytest.mark.parametrize(
    "line", ["Error 18 14:14:59 foo bar: x", "Failed 12 10:00:00 to start: y", "Note: 18 14:14:59 x"]
)
def test_a_capitalised_word_before_a_time_is_no_month(line):
    assert unwrap("t", 1, line)[0].wrapper is None
