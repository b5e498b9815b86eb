"""The toy program's one signature."""

from typing import Literal

import dspy


class TagFever(dspy.Signature):
    """Read a short clinical note and say whether the patient had a fever during the stay."""

    note: str = dspy.InputField(desc="a short clinical note")
    fever: Literal["yes", "no"] = dspy.OutputField(desc="yes when the note documents a fever, else no")
