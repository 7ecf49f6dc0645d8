"""Attribution: every dollar of the lake on one value per dimension, exactly once."""
