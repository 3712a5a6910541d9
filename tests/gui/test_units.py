import pytest

from pcitrace.errors import PcitraceError
from pcitrace.gui.units import format_freq, format_time, parse_range_ps, parse_time_ps


@pytest.mark.parametrize("text,ps", [("10us", 10e6), ("1.5ms", 1.5e9), ("250 ns", 250e3), ("3ps", 3.0),
                                     ("2s", 2e12), ("0.5", 0.5e12), ("1e3ns", 1e6), ("7µs", 7e6)])
def test_parse_time(text, ps):
    assert parse_time_ps(text) == pytest.approx(ps)


def test_parse_range_and_errors():
    assert parse_range_ps("10us:25us") == (pytest.approx(10e6), pytest.approx(25e6))
    for bad in ("10us", "10xs:20us", "20us:10us", "a:b"):
        with pytest.raises(PcitraceError) as e:
            parse_range_ps(bad)
        assert "Fix:" in str(e.value)


def test_format():
    assert format_time(12_345_000) == "12.35 us"
    assert format_time(999) == "999 ps"
    assert format_time(1.5e9) == "1.5 ms"
    assert format_freq(1e12 / 15000) == "66.67 MHz"
