"""Enumerations of the language (spec section 2.6)."""

import enum


class PaddingMode(enum.Enum):
    """Value given to the out-of-bounds lanes of a partially out-of-bounds tile load."""

    UNDETERMINED = "undetermined"
    ZERO = "zero"
    NEG_ZERO = "neg_zero"
    NAN = "nan"
    POS_INF = "pos_inf"
    NEG_INF = "neg_inf"


class RoundingMode(enum.Enum):
    RN = "rn"
    RZ = "rz"
    RM = "rm"
    RP = "rp"
    RA = "ra"
    FULL = "full"
    APPROX = "approx"
    RZI = "rzi"


class MemoryOrder(enum.Enum):
    WEAK = "weak"
    RELAXED = "relaxed"
    ACQUIRE = "acquire"
    RELEASE = "release"
    ACQ_REL = "acq_rel"


class MemoryScope(enum.Enum):
    NONE = "none"
    BLOCK = "block"
    DEVICE = "device"
    SYS = "sys"


PADDING_VALUES = {
    PaddingMode.UNDETERMINED: 0.0,
    PaddingMode.ZERO: 0.0,
    PaddingMode.NEG_ZERO: -0.0,
    PaddingMode.NAN: float("nan"),
    PaddingMode.POS_INF: float("inf"),
    PaddingMode.NEG_INF: float("-inf"),
}
"""The fill value of each padding mode, as a Python float (UNDETERMINED fills zeros here)."""
