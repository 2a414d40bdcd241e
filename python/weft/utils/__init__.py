"""weft.utils: data loading (weft.utils.data)."""
from . import data  # noqa: F401
