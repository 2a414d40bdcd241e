"""weft.utils: data loading (weft.utils.data)."""
from . import data

__all__ = ["data"]
