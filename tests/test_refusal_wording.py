"""The one shape of a range refusal (`number_in`) and of an unknown key (`unknown_setting`), common/errors.py."""

import re

import pytest

from common.errors import ConfigError, number_in, unknown_setting

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("value", "kw", "says"), [
    (True, {}, "x.k must be a number in [0, 1), not True"),               # a bool is no number
    ("0.5", {}, "x.k must be a number in [0, 1), not '0.5'"),             # nor a string that reads as one
    (float("nan"), {}, "x.k must be a number in [0, 1), not nan"),
    (1, {}, "x.k must be a number in [0, 1), not 1"),                     # the open end
    (0, {"low_open": True, "high_open": False}, "x.k must be a number in (0, 1], not 0"),
    (2.5, {"integer": True}, "x.k must be an integer from 0 to 1, not 2.5"),
    (None, {}, "x.k must be a number in [0, 1), not None"),
    ("y" * 100, {}, "x.k must be a number in [0, 1), not '" + "y" * 56 + "..."),
])
def test_a_value_out_of_range_is_one_line_naming_key_value_and_range(value, kw, says):
    kw = {"high_open": True, **kw}
    with pytest.raises(ConfigError) as err:
        number_in("x.k", value, 0, 1, **kw)
    assert str(err.value) == says and "\n" not in says


def test_bounds_null_and_the_note():
    assert number_in("k", 0, 0, 1) == 0.0 and isinstance(number_in("k", 1, 0, 1), float)    # closed ends pass
    assert number_in("k", 5, 1, 5, integer=True) == 5 and number_in("k", 10**9, 1, integer=True) == 10**9
    assert number_in("k", None, 1, integer=True, null=True) is None
    for value, kw, says in [(0, {"integer": True}, "k must be an integer >= 1, not 0"),
                            (0, {"low_open": True}, "k must be a number > 1, not 0"),
                            (float("inf"), {}, "k must be a number >= 1, not inf"),
                            (0, {"null": True, "note": "null: none"}, "k must be a number >= 1 or null (null: none), not 0")]:
        with pytest.raises(ConfigError, match=f"^{re.escape(says)}$"):
            number_in("k", value, 1, **kw)


def test_an_unknown_key_names_its_owner_and_settings():
    assert str(unknown_setting("a.b", "pkg.C", ["z", "y"], "a hint")) == "a.b: not a setting of pkg.C; its settings: y, z; a hint"
    assert str(unknown_setting("a.b", "grp=none", [])) == "a.b: not a setting of grp=none; its settings: none"
    assert str(unknown_setting("a.b", "pkg.C", None)) == "a.b: not a setting of pkg.C"
